"""Checkpointer: signs the chain head periodically (idle heartbeats included) and on shutdown."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from broker.ledger.checkpoints import Checkpoint, CheckpointStore, sign_checkpoint
from broker.ledger.errors import LedgerUnavailableError
from broker.ledger.sink import LedgerSink, SupportsSync
from broker.ledger.tail import unsigned_records
from broker.timestamps import utc_now

__all__ = ["Checkpointer", "utc_now"]

_log = logging.getLogger("broker.ledger")


class Checkpointer:
    """Writes a signed checkpoint of ``sink``'s head every ``interval_s``, and one on ``close()``.

    A checkpoint is written even when nothing was appended since the last one: heartbeats are
    what make a cut-off tail detectable (a later checkpoint commits to records that are gone).
    Before signing, the sink is synced, so a signed head never covers records a power loss
    could take back (which would look like tampering). At shutdown, close the Checkpointer
    before the sink: its last act is reading the sink's head.

    Args:
        sink: the ledger whose head is signed.
        signer: the Ed25519 private key (see ``load_or_create_signing_key``).
        store: where checkpoints go, apart from the records.
        interval_s: heartbeat period.
        clock: returns the checkpoint's ``time``; injectable for tests.
        wait: awaited between heartbeats (``asyncio.sleep``); injectable so tests need no sleeps.
        on_tail: told after each heartbeat how many records no checkpoint of this process has
            signed yet (0 after a checkpoint; the gauge ``broker_ledger_unsigned_records``).

    Attributes:
        written: checkpoints written; ``failures``: periodic checkpoints that could not be
        written (logged, retried at the next tick); ``last``: the latest checkpoint written.
    """

    def __init__(
        self,
        sink: LedgerSink,
        signer: Ed25519PrivateKey,
        store: CheckpointStore,
        *,
        interval_s: float = 60.0,
        clock: Callable[[], str] = utc_now,
        wait: Callable[[float], Awaitable[object]] = asyncio.sleep,
        on_tail: Callable[[int], object] | None = None,
    ) -> None:
        if interval_s <= 0:
            raise ValueError("interval_s must be positive")
        self.sink = sink
        self.store = store
        self.interval_s = interval_s
        self.written = 0
        self.failures = 0
        self.last: Checkpoint | None = None
        self._signer = signer
        self._clock = clock
        self._wait = wait
        self._task: asyncio.Task[None] | None = None
        self._write_lock = asyncio.Lock()
        self._on_tail = on_tail

    async def checkpoint(self) -> Checkpoint:
        """Sign and store the current head now.

        Raises:
            LedgerUnavailableError: the head could not be read or the checkpoint not stored.
        """
        async with self._write_lock:
            if isinstance(self.sink, SupportsSync):
                await self.sink.sync()
            head = await self.sink.head()
            checkpoint = sign_checkpoint(self._signer, head, self._clock())
            await self.store.append(checkpoint)
            self.written += 1
            self.last = checkpoint
            return checkpoint

    def start(self) -> None:
        """Start the heartbeat task on the running loop (idempotent)."""
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name="ledger-checkpointer"
            )

    async def _run(self) -> None:
        # The first one at once: it commits to the head as found at start (a tail cut while
        # nothing ran then shows), and a verifier holding the key always has one to check.
        while True:
            try:
                await self.checkpoint()
            except LedgerUnavailableError as exc:
                self.failures += 1
                # One line per interval: the cause is the sink's own message, not a traceback.
                _log.error(
                    "ledger checkpoint failed (%s); retrying in %.1f s", exc, self.interval_s
                )
                if self._on_tail is not None:
                    await self._report_tail()
            else:
                if self._on_tail is not None:
                    self._on_tail(0)
            await self._wait(self.interval_s)

    async def _report_tail(self) -> None:
        """After a failed checkpoint: how far the head is past the last one signed, so a tail
        that nothing signs shows as a growing number, not as silence."""
        tail = await unsigned_records(self.sink, self.store, self.last)
        if tail is not None and self._on_tail is not None:
            self._on_tail(tail)

    async def close(self) -> None:
        """Stop the heartbeat and write a final checkpoint of the head as it is at shutdown."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.wait([self._task])  # unlike awaiting it, never swallows our own cancel
            self._task = None
        await self.checkpoint()

    async def __aenter__(self) -> Checkpointer:
        self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()
