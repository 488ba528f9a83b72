"""Every error in OpenAI's body ``{"error": {"message", "type", "param", "code"}}``, in place
of FastAPI's ``{"detail": ...}`` and 422; the OpenAPI document is rewritten to match."""

from __future__ import annotations

import json
import math
import re
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from ignition.server.body import error_body

# Pydantic adds union members and validator kinds to error locations; they are not fields.
_TAG = re.compile(r"^(str|int|float|bool|dict|list|none|null)$|[\[\-]|^[A-Z]\w*Request$")
_HTTP_KINDS = {404: "not_found", 405: "method_not_allowed"}


class ApiError(Exception):
    """A request answered with an OpenAI error (raised by handlers, rendered once here)."""

    def __init__(
        self,
        status: int,
        message: str,
        kind: str = "invalid_request_error",
        param: str | None = None,
        code: str | int | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status, self.message, self.kind = status, message, kind
        self.param, self.code, self.headers = param, code, headers


def json_response(status: int, content: Any, headers: dict[str, str] | None = None) -> Response:
    """ASCII JSON: a lone surrogate that slipped into a message can still be sent."""
    return Response(
        json.dumps(content).encode(),
        status_code=status,
        media_type="application/json",
        headers=headers,
    )


def error_response(err: ApiError) -> Response:
    body = error_body(err.message, err.kind, err.param, err.code)
    return json_response(err.status, body, err.headers)


def overloaded(message: str) -> ApiError:
    return ApiError(503, message, "server_overloaded", None, 503, {"Retry-After": "1"})


def _shown(value: Any) -> str:
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    return json.dumps(value)[:80] if isinstance(value, str | int | float | bool) else "a value"


def _most_specific(errors: list[dict[str, Any]]) -> dict[str, Any]:
    """Of a union's one error per member, the one naming the rule the client broke: not a
    type mismatch, then our own checks, then the deepest location (docs/server.md, "Errors").
    """
    if not errors:
        return {}
    typed = [e for e in errors if not str(e.get("type", "")).endswith("_type")] or errors
    ours = [e for e in typed if e.get("type") in ("value_error", "string_unicode")]
    return ours[0] if ours else max(typed, key=lambda e: len(e.get("loc", ())))


def _without_union_tags(location: list[Any]) -> list[Any]:
    """Drop the member tag pydantic puts after a tagged union's index (``content.0.text``
    for a text part), which would otherwise read as a field (``content.0.text.text``)."""
    kept, skip_tag = [], False
    for i, part in enumerate(location):
        if skip_tag and isinstance(part, str) and i > 0 and isinstance(location[i - 1], int):
            skip_tag = False
            continue
        skip_tag = skip_tag or "tagged-union[" in str(part)
        kept.append(part)
    return kept


def validation_message(err: RequestValidationError) -> tuple[str, str | None]:
    """One line naming the field and the rule, and the field as ``param``."""
    first = _most_specific(err.errors())
    kind = first.get("type", "")
    location = [p for p in first.get("loc", ()) if p != "body"]
    if kind == "json_invalid":
        detail = (first.get("ctx") or {}).get("error", "malformed")
        where = f" at character {location[0]}" if location else ""
        return f"the request body is not valid JSON: {detail}{where}", None
    parts = _without_union_tags(location)
    fields = [str(p) for p in parts if isinstance(p, int) or not _TAG.search(str(p))]
    param = ".".join(fields) or None
    message = str(first.get("msg", "invalid request")).removeprefix("Value error, ")
    if kind == "finite_number":
        message = f"must be a finite number, got {_shown(first.get('input'))}"
    elif kind == "string_unicode":
        message = "contains a lone surrogate; text must be valid Unicode"
    elif kind == "union_tag_not_found":
        discriminator = (first.get("ctx") or {}).get("discriminator", "'type'")
        message = f"has no {discriminator} field naming its kind"
    elif kind == "missing":
        message = "is required"
    if param is None or message.startswith(param.split(".")[0]):
        return message, param
    return f"{param}: {message}", param


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(ApiError)
    async def _api(_: Request, err: ApiError) -> Response:
        return error_response(err)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, err: RequestValidationError) -> Response:
        message, param = validation_message(err)
        return error_response(ApiError(400, message, param=param))

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, err: StarletteHTTPException) -> Response:
        if err.status_code == 404:
            message = f"no route {request.method} {request.url.path}"
        elif err.status_code == 405:
            message = f"{request.method} is not allowed on {request.url.path}"
        else:
            message = str(err.detail)
        kind = "invalid_request_error" if err.status_code < 500 else "server_error"
        code = _HTTP_KINDS.get(err.status_code)
        return error_response(ApiError(err.status_code, message, kind, None, code, err.headers))


def _allow_null(definition: dict[str, Any]) -> None:
    """Optional request fields accept ``null`` (it means "not given")."""
    required = set(definition.get("required", ()))
    for name, prop in definition.get("properties", {}).items():
        if name in required:
            continue
        options = prop.get("anyOf", [prop])
        if any(o.get("type") == "null" for o in options):
            continue
        meta = {k: prop.pop(k) for k in ("title", "default", "description") if k in prop}
        definition["properties"][name] = {"anyOf": [prop, {"type": "null"}], **meta}


def _bound_token_ids(schema: Any, vocab_size: int) -> None:
    """Integer items of token-id arrays stop below the vocabulary size."""
    if isinstance(schema, dict):
        items = schema.get("items")
        if isinstance(items, dict) and items.get("type") == "integer":
            items["maximum"] = vocab_size - 1
        for value in schema.values():
            _bound_token_ids(value, vocab_size)
    elif isinstance(schema, list):
        for value in schema:
            _bound_token_ids(value, vocab_size)


# Pydantic leaves bounds of types with a before-validator under their Python names.
_BOUNDS = {"ge": "minimum", "le": "maximum", "gt": "exclusiveMinimum", "lt": "exclusiveMaximum"}


def _json_schema_bounds(schema: Any) -> None:
    if isinstance(schema, dict):
        if schema.get("type") in ("integer", "number"):
            for python, json_name in _BOUNDS.items():
                if python in schema:
                    schema[json_name] = schema.pop(python)
        for value in schema.values():
            _json_schema_bounds(value)
    elif isinstance(schema, list):
        for value in schema:
            _json_schema_bounds(value)


_TOKEN_ID_FIELDS = (
    ("CompletionRequest", "prompt"),
    ("CompletionRequest", "stop_token_ids"),
    ("ChatCompletionRequest", "stop_token_ids"),
    ("DetokenizeRequest", "tokens"),
)


def openai_openapi(
    app: FastAPI, served_names: tuple[str, ...], vocab_size: int | None = None
) -> dict[str, Any]:
    """FastAPI's document as the server behaves: no 422s, ``model`` limited to the served
    names, ``null`` allowed for optional fields, token ids bounded by the vocabulary."""
    if app.openapi_schema is not None:
        return app.openapi_schema
    from fastapi.openapi.utils import get_openapi

    schema = get_openapi(title=app.title, version=app.version, routes=app.routes)
    for path in schema.get("paths", {}).values():
        for operation in path.values():
            operation.get("responses", {}).pop("422", None)
    components = schema.get("components", {}).get("schemas", {})
    components.pop("HTTPValidationError", None)
    components.pop("ValidationError", None)
    _json_schema_bounds(components)
    for definition in components.values():
        _allow_null(definition)
        model = definition.get("properties", {}).get("model")
        if model is not None and "anyOf" in model:
            model["anyOf"] = [{"type": "string", "enum": list(served_names)}, {"type": "null"}]
    if vocab_size is not None:
        for component, name in _TOKEN_ID_FIELDS:
            prop = components.get(component, {}).get("properties", {}).get(name)
            if prop is not None:
                _bound_token_ids(prop, vocab_size)
    app.openapi_schema = schema
    return schema
