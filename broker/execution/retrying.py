"""Which failures are transient, and the retries after a first transient failure.

``is_transient`` is the one classification the executor, the precondition check and anything
else around an adapter call (a breaker, a bulkhead) share: a transport fault, a timeout, a 5xx
and a backend's 408 or 429 may succeed if repeated; any other failure is definite. A transient
failure that is not overcome within the deadline releases the idempotency key (nothing is
stored, so a retry of the key may execute); a definite one is stored and replayed.

Retries honour a backend's ``Retry-After`` (a 429's, a 503's): the wait before the next attempt
is at least what the backend asked, and an attempt whose wait would end past the deadline is not
made, so the call gives up at once rather than sleeping into a timeout (which would leave the
key ``outcome_unknown`` for a non-idempotent tool although the backend refused the call).
"""

from __future__ import annotations

import math
import time
from collections.abc import Awaitable, Callable
from typing import Any

from tenacity import (
    AsyncRetrying,
    RetryCallState,
    stop_after_attempt,
    stop_before_delay,
    wait_random_exponential,
)

from broker.config import RetryConfig
from broker.taxonomy import ProviderError, is_transient

__all__ = [
    "DEFAULT_RETRY_AFTER_S",
    "answer_retry_after",
    "is_transient",
    "retry_after_of",
    "retry_transient",
]

Sleep = Callable[[float], Awaitable[None]]

DEFAULT_RETRY_AFTER_S = 1.0
"""``Retry-After`` of a transient failure whose backend did not say how long to wait."""


def retry_after_of(exc: BaseException) -> float | None:
    """The wait a backend asked for with its failure, if it said."""
    return exc.retry_after_s if isinstance(exc, ProviderError) else None


def answer_retry_after(exc: BaseException) -> float:
    """The ``Retry-After`` to answer a caller after a transient failure: the backend's, at least
    one second (whole seconds on the wire)."""
    asked = retry_after_of(exc)
    return float(max(1, math.ceil(asked))) if asked is not None else DEFAULT_RETRY_AFTER_S


class _Backoff:
    """Tenacity's jittered exponential wait, raised to the backend's ``Retry-After``."""

    def __init__(self, policy: RetryConfig, multiplier: float) -> None:
        self._jitter = wait_random_exponential(multiplier=multiplier, max=policy.max_backoff_s)

    def __call__(self, state: RetryCallState) -> float:
        drawn = self._jitter(state)
        failed = state.outcome.exception() if state.outcome is not None else None
        asked = retry_after_of(failed) if failed is not None else None
        return max(drawn, asked) if asked is not None else drawn


async def retry_transient(
    once: Callable[[], Awaitable[dict[str, Any]]],
    first: ProviderError,
    policy: RetryConfig,
    *,
    deadline: float,
    sleep: Sleep,
    allow: Callable[[], bool] | None = None,
) -> dict[str, Any]:
    """The attempts after a first one failed with ``first`` (transient), until one succeeds, one
    fails definitely, the policy's attempts are spent, or the next wait would cross ``deadline``
    (``time.monotonic()``); then the last failure is raised.

    Tenacity only steps in once a retry is needed: driving even a first, successful attempt
    through it costs about 70 µs, more than a fast adapter call. Its attempt numbers restart
    here, so the multiplier is doubled to keep every wait what a single ``AsyncRetrying`` over
    all the attempts would have drawn (uniform up to ``initial_backoff_s * 2**(n - 1)``, capped).
    ``allow`` (the backend's retry budget) is asked only for a retry that would otherwise happen.
    """
    stop_after = policy.attempts - 1

    def should_retry(state: RetryCallState) -> bool:
        failed = state.outcome.exception() if state.outcome is not None else None
        if failed is None or not is_transient(failed) or state.attempt_number >= stop_after:
            return False
        return allow is None or allow()

    first_wait = wait_random_exponential(
        multiplier=policy.initial_backoff_s, max=policy.max_backoff_s
    )(RetryCallState(AsyncRetrying(), None, (), {}))
    asked = first.retry_after_s
    if asked is not None:
        first_wait = max(first_wait, asked)
    if time.monotonic() + first_wait >= deadline:
        raise first
    await sleep(first_wait)
    retrying = AsyncRetrying(
        stop=(
            stop_after_attempt(stop_after)
            # Measured from here: tenacity's clock starts when the retries do.
            | stop_before_delay(max(deadline - time.monotonic(), 0.0))
        ),
        wait=_Backoff(policy, policy.initial_backoff_s * 2),
        retry=should_retry,
        sleep=sleep,
        reraise=True,
    )
    return await retrying(once)
