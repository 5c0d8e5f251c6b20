"""``POST /v1/catalog/mediate``: an agent's own request's tools, after its route's rules."""

from __future__ import annotations

from typing import Any

import msgspec
from litestar import Controller, Request, Response, post

from broker.api.errors import problem_response
from broker.api.json_body import located, read_json_body
from broker.api.shared import broker_state, principal_of
from broker.mediation.agent_catalog import (
    CatalogMediateRequest,
    RequestProblem,
    mediate_request,
)
from broker.model import FieldError
from broker.native.catalogs import ProviderCatalogs
from broker.taxonomy import Code

__all__ = ["CatalogController"]

_request = msgspec.json.Decoder(CatalogMediateRequest)
_encoder = msgspec.json.Encoder()
_NOT_READ = (msgspec.DecodeError, UnicodeDecodeError, RecursionError)


class CatalogController(Controller):
    path = "/v1/catalog"
    tags = ["tools"]

    @post(
        "/mediate",
        status_code=200,
        operation_id="mediateCatalog",
        summary="Mediate the tools of an agent's own provider request",
        description=(
            "Take the tools and tool_choice of an OpenAI (Chat Completions or Responses) or "
            "Anthropic request; answer them as the token's route's model may see them, in the "
            "same format: the route's tools in their mediated declaration, hidden ones dropped, "
            "tools the broker does not have passed through (or dropped, on a route with "
            'unknown_tools = "drop"), tool_choice renamed or dropped with the tool it names; '
            "and one receipt per declaration. Nothing is recorded."
        ),
    )
    async def mediate(self, request: Request[Any, Any, Any]) -> Response[bytes]:
        principal = principal_of(request)
        if principal.route is None:
            return problem_response(
                Code.FORBIDDEN, "only a route token's requests are mediated (its route's rules)"
            )
        received = await read_json_body(request)
        if isinstance(received, Response):
            return received
        try:
            body = _request.decode(received)
        except msgspec.ValidationError as exc:
            pointer, message = located(exc)
            return _invalid([FieldError(pointer, message)])
        except _NOT_READ:
            return problem_response(
                Code.MALFORMED_REQUEST,
                "the body is not valid JSON",
                errors=[FieldError("", "expected a JSON object")],
            )
        catalogs: ProviderCatalogs = request.app.state.provider_catalogs
        mediator = broker_state(request).pipeline.mediator
        try:
            answer = mediate_request(mediator, catalogs.names(), principal, body)
        except RequestProblem as exc:
            return _invalid(exc.errors)
        return Response(content=_encoder.encode(answer), media_type="application/json")


def _invalid(errors: list[FieldError]) -> Response[bytes]:
    return problem_response(
        Code.SCHEMA_INVALID, "the tool declarations cannot be mediated", errors=errors
    )
