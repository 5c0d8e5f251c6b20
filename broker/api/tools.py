"""``/v1/tools``: list what a route may call; register, read and remove backend tools.

Who may do what: a route token lists the tools its route may call; an admin token lists, reads,
registers and removes any tool; a backend token (``backend_namespace``) does so for the tools
named ``<namespace>.*`` only, and may grant them only to its ``backend_routes``. Tools defined in
the config are read-only here.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any

import msgspec
from litestar import Controller, Request, Response, delete, get, post, route
from litestar.enums import HttpMethod
from litestar.params import FromPath, Parameter

from broker.api.errors import problem_response
from broker.api.json_body import read_json_body
from broker.api.shared import BrokerState, broker_state, principal_of
from broker.gateway.errors import CatalogError
from broker.model import FieldError, Principal
from broker.native.catalogs import CATALOG_FORMATS, ProviderCatalogs
from broker.stores import RegisteredTool
from broker.taxonomy import Code
from broker.tools.registration import (
    Registration,
    check_registration,
    registration_tool_id,
    to_tool_config,
)
from broker.tools.registration_views import ConfigToolView, RegisteredToolView, RegistrationAnswer
from broker.tools.sync import Catalog

__all__ = ["ToolController"]

_encoder = msgspec.json.Encoder()


def _catalog(request: Request[Any, Any, Any]) -> Catalog:
    catalog: Catalog = request.app.state.catalog
    return catalog


def _json(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response[bytes]:
    return Response(
        content=_encoder.encode(body),
        status_code=status,
        media_type="application/json",
        headers=headers or {},
    )


def _manages(principal: Principal, name: str) -> bool:
    if principal.admin:
        return True
    return principal.namespace is not None and name.startswith(principal.namespace + ".")


def _not_yours(principal: Principal) -> Response[bytes]:
    if principal.namespace is None:
        return problem_response(Code.FORBIDDEN, "only an admin or a backend token manages tools")
    return problem_response(
        Code.FORBIDDEN,
        f"this backend token manages only tools named {principal.namespace}.*",
    )


def _registered_view(
    registration: Registration, stored: RegisteredTool, problems: list[str]
) -> RegisteredToolView:
    return RegisteredToolView.of(
        registration,
        problems=problems,
        updated_at=datetime.fromtimestamp(stored.updated_at, UTC).isoformat(
            timespec="milliseconds"
        ),
        updated_by=stored.updated_by,
    )


def _stray_query(request: Request[Any, Any, Any], allowed: str) -> Response[bytes] | None:
    """A 400 naming the first query parameter other than ``allowed``, else ``None``."""
    stray = sorted(set(request.query_params) - {allowed})
    if not stray:
        return None
    return problem_response(
        Code.MALFORMED_REQUEST, f"unknown query parameter {stray[0]!r}; the only one is {allowed}"
    )


def _gateway_problem(registration: Registration, state: BrokerState) -> str | None:
    """Why the registration would leave a gateway or proxy route's catalog unservable."""
    config = state.config
    if all(config.routes[r].catalog == "tools" for r in registration.routes if r in config.routes):
        return None
    # Imported only here: counting card tokens loads tiktoken (gateway routes only).
    from broker.gateway.checks import registration_problem

    return registration_problem(
        registration_tool_id(registration),
        registration.name,
        to_tool_config(registration, config),
        registration.routes,
        tools=state.registry.tools,
        config=config,
    )


def _allow(methods: str) -> Response[None]:
    return Response(content=None, status_code=204, headers={"Allow": methods})


class ToolController(Controller):
    """Why the explicit ``OPTIONS`` handlers: Litestar adds one to a route when its first handler
    is registered and never updates it, so for a path with two methods it would answer ``Allow``
    with the first alone. They must sort first by name (Litestar registers a controller's
    handlers in ``dir()`` order); otherwise startup fails on a second ``OPTIONS`` handler."""

    path = "/v1/tools"

    @route("/", http_method=[HttpMethod.OPTIONS], include_in_schema=False)
    async def allow_collection(self) -> Response[None]:
        return _allow("GET, OPTIONS, POST")

    @route("/{name:str}", http_method=[HttpMethod.OPTIONS], include_in_schema=False)
    async def allow_tool(self, name: FromPath[str]) -> Response[None]:
        return _allow("DELETE, GET, OPTIONS")

    @get(
        "/",
        operation_id="listTools",
        summary="List the tools this route may call",
        description=(
            "Every tool for an admin token. Adapters and credentials are never shown. With "
            "?format=openai|openai-responses|anthropic|gemini|mcp, the same tools as that "
            "provider's tool declarations; on a route whose catalog is gateway or proxy, its "
            "meta-tools (tool_browse, tool_hydrate, tool_execute, tool_view) instead, after a "
            "proxy's schema-free card per tool."
        ),
        tags=["tools"],
    )
    async def list_tools(
        self,
        request: Request[Any, Any, Any],
        format: Annotated[
            str | None,
            Parameter(
                schema_extra={"enum": list(CATALOG_FORMATS)},
                description=(
                    "Answer the tools as this provider declares them: {format, tools, names}, "
                    "where tools is what the provider SDK's tools= takes and names maps each "
                    "exposed name that differs (encoded: . as --, - as -_) to the tool's name."
                ),
            ),
        ] = None,
    ) -> Response[bytes]:
        principal = principal_of(request)
        stray = _stray_query(request, "format")
        if stray is not None:  # a misspelt format= would otherwise answer the plain list
            return stray
        if format is not None:
            if format not in CATALOG_FORMATS:
                # Checked here rather than typed as a Literal: Litestar's own refusal would not
                # say which formats there are.
                return problem_response(
                    Code.MALFORMED_REQUEST,
                    f"unknown format {format!r}; one of: {', '.join(CATALOG_FORMATS)}",
                    errors=[FieldError("", "format: unknown tool catalog format")],
                )
            gateway = broker_state(request).gateway
            if gateway.serves(principal):  # a gateway or proxy route: its meta-tools
                catalog = gateway.catalogs.for_principal(principal)
                try:
                    content = await catalog.answer(format, gateway.catalogs.encoder)
                except CatalogError as exc:
                    # Checked at start and at registration; a tool stored by an older version,
                    # or two processes registering at once, can still break a card's bounds.
                    return problem_response(
                        Code.SERVICE_UNAVAILABLE,
                        f"this route's catalog cannot be listed until the operator fixes it: {exc}",
                    )
            else:
                catalogs: ProviderCatalogs = request.app.state.provider_catalogs
                content = catalogs.answer(principal, format)
            return Response(content=content, media_type="application/json")
        state = broker_state(request)
        # The route's rules, after the policy's hide rules.
        tools = state.pipeline.mediator.visible_to(principal)
        return _json({"tools": [tool.describe() for tool in tools]})

    @post(
        "/",
        status_code=201,
        operation_id="registerTool",
        summary="Register or replace a tool",
        description=(
            "Validate the registration whole (every problem is listed), store it, and grant the "
            "tool to its routes. The answer carries the tool's signing_secret when this write "
            "set one (a new tool, or ?rotate_secret=true); no later read returns it."
        ),
        tags=["tools"],
    )
    async def register(
        self,
        request: Request[Any, Any, Any],
        rotate_secret: Annotated[
            bool,
            Parameter(
                description=(
                    "Replace the tool's signing secret (the answer then carries the new one). "
                    "Without it a replacement keeps the earlier secret and answers "
                    "signing_secret: null."
                )
            ),
        ] = False,
    ) -> Response[bytes]:
        principal = principal_of(request)
        if not principal.admin and principal.namespace is None:
            return _not_yours(principal)
        stray = _stray_query(request, "rotate_secret")
        if stray is not None:  # a misspelt rotate_secret= would keep the old secret, silently
            return stray
        received = await read_json_body(request)
        if isinstance(received, Response):
            return received
        try:
            raw = msgspec.json.decode(received)
        except (msgspec.DecodeError, RecursionError, UnicodeDecodeError):
            return problem_response(Code.MALFORMED_REQUEST, "the body is not valid JSON")
        name = raw.get("name") if isinstance(raw, dict) else None
        if isinstance(name, str) and not _manages(principal, name):
            return _not_yours(principal)
        state = broker_state(request)
        catalog = _catalog(request)
        registry = state.registry
        registration, errors = check_registration(
            raw,
            config=state.config,
            principal=principal,
            allowlist=registry.outbound.allowlist,
            tool_ids={n: t.tool_id for n, t in registry.tools.items()},
        )
        if registration is None:
            return problem_response(
                Code.SCHEMA_INVALID,
                f"{len(errors)} problem(s) with the registration",
                errors=errors,
            )
        if not _manages(principal, registration.name):  # a namespace-less token; cannot happen
            return _not_yours(principal)
        unservable = _gateway_problem(registration, state)
        if unservable is not None:
            return problem_response(
                Code.SCHEMA_INVALID,
                "1 problem(s) with the registration",
                errors=[FieldError("/name", unservable)],
            )
        done = await catalog.register(registration, principal, rotate_secret=rotate_secret)
        body = RegistrationAnswer(
            name=registration.name,
            tool_id=done.tool_id,
            created=done.write.created,
            signing_secret=done.signing_secret,
            tool=_registered_view(
                registration, done.stored, list(catalog.problems.get(registration.name, []))
            ),
        )
        headers = {"Cache-Control": "no-store", "Location": f"/v1/tools/{registration.name}"}
        return _json(body, 201 if done.write.created else 200, headers)

    @get(
        "/{name:str}",
        operation_id="getTool",
        summary="Read a tool",
        description="A registered tool as registered (never its signing secret), or a config tool.",
        tags=["tools"],
    )
    async def read(self, request: Request[Any, Any, Any], name: FromPath[str]) -> Response[bytes]:
        principal = principal_of(request)
        if not _manages(principal, name):
            return _not_yours(principal)
        registry = broker_state(request).registry
        configured = registry.config_tools.get(name)
        if configured is not None:
            return _json(ConfigToolView(**configured.describe()))
        catalog = _catalog(request)
        stored = await catalog.read(name)
        if stored is None:
            return problem_response(Code.NOT_FOUND, f"no tool {name!r}")
        registration, record = stored
        return _json(_registered_view(registration, record, list(catalog.problems.get(name, []))))

    @delete(
        "/{name:str}",
        status_code=200,  # the answer is 204, or a problem: Litestar refuses bodies on 204 routes
        operation_id="deleteTool",
        summary="Remove a registered tool",
        description="Routes can no longer call it; tools from the config cannot be removed.",
        tags=["tools"],
    )
    async def remove(self, request: Request[Any, Any, Any], name: FromPath[str]) -> Response[bytes]:
        principal = principal_of(request)
        if not _manages(principal, name):
            return _not_yours(principal)
        if name in broker_state(request).registry.config_tools:
            return problem_response(
                Code.FORBIDDEN, f"{name!r} is defined in the broker's config; change it there"
            )
        if not await _catalog(request).remove(name, principal):
            return problem_response(Code.NOT_FOUND, f"no tool {name!r}")
        return Response(content=b"", status_code=204)
