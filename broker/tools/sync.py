"""Registered tools: written to the store, and mirrored into every process's :class:`Registry`.

The hot path never reads the store for tools: each process holds the whole catalog in memory and
swaps in a new one when the store's catalog version moves. Each process learns of a change

* at once, when it made the change itself (the write is followed by a reload);
* within milliseconds, from the ``PUBLISH`` every write sends (Redis pub/sub);
* within ``[service] registry_poll_s`` (default 1 s) in any case: a background task compares the
  version counter (one ``GET``) that often, so a lost pub/sub message or a reconnect costs at
  most one poll interval. That interval (plus one reload) is the staleness bound;
* and before a proposal is answered ``unknown_tool`` (:meth:`Catalog.catch_up`): the version is
  compared then too (one round trip, only on that path), so a tool registered through another
  process is callable as soon as its registration was answered.

A stored registration that no longer builds here (its URL left the allowlist, the ``mcp`` extra
is missing, a secret is unset) is skipped, logged and shown as ``inactive`` to admins; the
others still load.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets as random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import msgspec

from broker.allowlist import RefusedURL
from broker.config import BrokerConfig
from broker.logs import RateLimitedLog
from broker.model import Principal
from broker.stores import RegisteredTool, ToolCatalogStore, ToolWrite
from broker.taxonomy import StoreUnavailableError
from broker.tools.registration import HttpSpec, Registration, registration_tool_id, to_tool_config
from broker.tools.registration_limits import registered_limits
from broker.tools.runtime import PreconditionRuntime, Registry, ToolRuntime
from broker.tools.secrets import resolve_credentials, resolve_tenant_credentials
from broker.validators.schema import ArgsValidator

__all__ = ["Catalog", "Registered"]

log = logging.getLogger("broker.tools.sync")
_follow_faults = RateLimitedLog(log)  # a store down says so once a minute, not every poll

_decoder = msgspec.json.Decoder(Registration)


@dataclass(frozen=True, slots=True)
class Registered:
    """The answer to a registration write."""

    write: ToolWrite
    registration: Registration
    stored: RegisteredTool
    tool_id: str
    signing_secret: str | None
    """The new secret, when this write set one (a new tool, or a rotation); else ``None``."""


class Catalog:
    def __init__(
        self,
        registry: Registry,
        store: ToolCatalogStore,
        config: BrokerConfig,
        *,
        secrets: Mapping[str, str],
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.registry = registry
        self._store = store
        self._config = config
        self._secrets = secrets
        self._clock = clock
        self._poll_s = config.service.registry_poll_s
        self._built: dict[str, tuple[bytes, str, ToolRuntime]] = {}
        self._lock = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None
        self.problems: Mapping[str, list[str]] = MappingProxyType({})
        """Why a stored registration is not active in this process, by tool name."""
        registry.catch_up = self.catch_up

    # -- writes (the API) ------------------------------------------------------------------------

    async def register(
        self, registration: Registration, principal: Principal, *, rotate_secret: bool
    ) -> Registered:
        secret = random.token_urlsafe(32)
        stored = RegisteredTool(
            name=registration.name,
            spec=msgspec.json.encode(registration),
            signing_secret=secret,
            updated_at=self._clock(),
            updated_by=principal.service_account,
        )
        write = await self._store.put_tool(stored, keep_secret=not rotate_secret)
        log.info(
            "tool %s %s by %s (catalog version %d)",
            registration.name,
            "registered" if write.created else "replaced",
            principal.service_account,
            write.version,
        )
        await self.load()
        return Registered(
            write,
            registration,
            stored,
            registration_tool_id(registration),
            None if write.secret_kept else secret,
        )

    async def remove(self, name: str, principal: Principal) -> bool:
        version = await self._store.delete_tool(name)
        if version is None:
            return False
        log.info(
            "tool %s removed by %s (catalog version %d)", name, principal.service_account, version
        )
        await self.load()
        return True

    async def read(self, name: str) -> tuple[Registration, RegisteredTool] | None:
        stored = await self._store.get_tool(name)
        if stored is None:
            return None
        return _decoder.decode(stored.spec), stored

    # -- mirroring the store ---------------------------------------------------------------------

    async def load(self) -> None:
        """Read the whole catalog and swap it in."""
        async with self._lock:
            # Loads are serialized, and each reads the store afresh, so the last one wins and
            # is never older than an earlier one.
            snapshot = await self._store.list_tools()
            built: dict[str, ToolRuntime] = {}
            problems: dict[str, list[str]] = {}
            cache: dict[str, tuple[bytes, str, ToolRuntime]] = {}
            for stored in snapshot.tools:
                previous = self._built.get(stored.name)
                if previous and previous[:2] == (stored.spec, stored.signing_secret):
                    runtime = previous[2]
                else:
                    found: list[str] = []
                    maybe = self._build(stored, found)
                    if maybe is None:
                        problems[stored.name] = found
                        log.warning("registered tool %s is inactive: %s", stored.name, found)
                        continue
                    runtime = maybe
                built[stored.name] = runtime
                cache[stored.name] = (stored.spec, stored.signing_secret, runtime)
            self._built = cache
            self.problems = MappingProxyType(problems)
            self.registry.install(snapshot.version, built)

    async def catch_up(self) -> None:
        """Reload if the store's catalog version differs from the one installed here.

        One ``GET`` when nothing moved. Not shared between concurrent callers: a look that
        started before a caller's miss may predate the registration that caller needs. A store
        that cannot answer changes nothing: the proposal is answered as it would have been.
        """
        try:
            if await self._store.tools_version() != self.registry.version:
                await self.load()
        except StoreUnavailableError as exc:
            log.warning("cannot check the registered tools' version: %s", exc)
        except Exception:  # as in _follow: a fault here must not fail the proposal's answer
            log.exception("catching up with registered tools failed")

    async def start(self) -> None:
        """Load what the store holds and keep following it (call in the app's lifespan)."""
        try:
            await self.load()
        except StoreUnavailableError:
            log.warning("registered tools could not be loaded yet; retrying in the background")
        self._task = asyncio.create_task(self._follow(), name="broker-catalog")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _follow(self) -> None:
        while True:
            try:
                await self._store.wait_tools_changed(self._poll_s)
                if await self._store.tools_version() != self.registry.version:
                    await self.load()
            except StoreUnavailableError as exc:
                _follow_faults.warning("cannot follow registered tools: %s", exc)
                await asyncio.sleep(self._poll_s)
            except Exception:  # never let the follower die: the next poll tries again
                log.exception("following registered tools failed")
                await asyncio.sleep(self._poll_s)

    # -- building ----------------------------------------------------------------------------------

    def _build(self, stored: RegisteredTool, problems: list[str]) -> ToolRuntime | None:
        try:
            registration = _decoder.decode(stored.spec)
        except msgspec.DecodeError as exc:
            problems.append(f"unreadable registration: {exc}")
            return None
        outbound = self.registry.outbound
        spec = registration.adapter
        try:
            outbound.allowlist.match(spec.url)
        except RefusedURL as exc:
            problems.append(str(exc))
            return None
        config_problems: list[tuple[str, str]] = []
        where = f"registered_tools.{stored.name}"
        bound = self._config.registered_tools.get(stored.name)
        credentials = resolve_credentials(
            f"{where}.credentials",
            bound.credentials if bound else {},
            self._secrets,
            config_problems,
        )
        tenant_credentials = (
            resolve_tenant_credentials(where, bound, self._secrets, config_problems)
            if bound
            else {}
        )
        preconditions = self._preconditions(registration, stored.signing_secret, problems)
        budgets, rate_limits = registered_limits(registration, self._config, problems)
        if config_problems or preconditions is None or budgets is None or rate_limits is None:
            problems.extend(f"{path}: {message}" for path, message in config_problems)
            return None
        try:
            if isinstance(spec, HttpSpec):
                adapter: Any = outbound.http_adapter(
                    tool=stored.name,
                    url=spec.url,
                    secret=stored.signing_secret,
                    credential_headers=spec.credential_headers,
                )
            else:
                adapter = outbound.mcp_adapter(
                    tool=stored.name,
                    url=spec.url,
                    upstream_tool=spec.tool,
                    credential_headers=spec.credential_headers,
                )
        except ImportError:
            problems.append("the mcp extra is not installed on this broker")
            return None
        tool_config = to_tool_config(registration, self._config)
        return ToolRuntime(
            name=stored.name,
            tool_id=registration_tool_id(registration),
            config=tool_config,
            args=ArgsValidator(registration.input_schema),
            adapter=adapter,
            preconditions=preconditions,
            budgets=budgets,
            rate_limits=rate_limits,
            credentials=MappingProxyType(credentials),
            tenant_credentials=tenant_credentials,
            sensitive=frozenset(
                k.lower() for k in (*registration.sensitive, *self._config.service.sensitive_fields)
            ),
            redact_result=frozenset(k.casefold() for k in registration.redact_result),
            previewer=None,
            routes=frozenset(r for r in registration.routes if r in self._config.routes),
            registered=True,
            guard=outbound.guards.for_adapter(tool_config.adapter),
        )

    def _preconditions(
        self, registration: Registration, secret: str, problems: list[str]
    ) -> tuple[PreconditionRuntime, ...] | None:
        runtimes: list[PreconditionRuntime] = []
        for name in registration.preconditions:
            spec = registration.verifiers.get(name)
            if spec is not None:
                verifier = self.registry.outbound.http_verifier(
                    precondition=name, url=spec.url, secret=secret
                )
                runtimes.append(PreconditionRuntime(name, verifier, spec.remediation))
            elif name in self.registry.config_preconditions:
                runtimes.append(self.registry.config_preconditions[name])
            else:
                problems.append(f"precondition {name!r} no longer exists")
                return None
        return tuple(runtimes)
