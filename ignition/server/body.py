"""The base of every request body (nulls, unknown fields, strict types, valid Unicode:
docs/server.md, "Request bodies"), and OpenAI's error and usage shapes.
"""

from __future__ import annotations

import logging
import time
import uuid
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    model_validator,
)

from ignition.server import schema_rules

log = logging.getLogger("ignition.server")


def valid_unicode(value: str) -> str:
    """Reject lone surrogates: JSON allows ``\\ud800`` but no tokenizer can encode it."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as err:
        bad = value[err.start].encode("utf-8", "backslashreplace").decode()
        raise ValueError(
            f"contains a lone surrogate {bad} at character {err.start}; text must be valid Unicode"
        ) from None
    return value


def _integer(value: Any) -> Any:
    """JSON Schema's integers: 3 and 3.0, never true or "3"."""
    if isinstance(value, bool):
        raise ValueError("must be an integer, not a boolean")
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


Text = Annotated[str, Field(strict=True), AfterValidator(valid_unicode)]
StopText = Annotated[str, Field(strict=True, min_length=1), AfterValidator(valid_unicode)]
Int = Annotated[int, BeforeValidator(_integer), Field(strict=True)]
PositiveInt = Annotated[Int, Field(ge=1)]
TokenId = Annotated[Int, Field(ge=0)]
Bool = Annotated[bool, Field(strict=True)]
Float = Annotated[float, Field(strict=True, allow_inf_nan=False)]
# A vLLM flag this server does not serve: only false is accepted (the schema says so).
NeutralFalse = Annotated[bool, Field(strict=True, json_schema_extra={"enum": [False]})]
NOT_SERVED = "send it unset (or null, false, empty)"


def _schema_extra(schema: dict[str, Any], cls: type[Body]) -> None:
    schema_rules.add_rules(schema, cls.schema_rules())


class Body(BaseModel):
    """Nulls are absent, unknown fields are dropped with one log line. A body whose
    validators compare fields says the same in its schema (``schema_rules``)."""

    model_config = ConfigDict(extra="ignore", json_schema_extra=_schema_extra)

    @classmethod
    def schema_rules(cls) -> list[dict[str, Any]]:
        """The cross-field rules of this body's validators, as JSON Schema."""
        return []

    @model_validator(mode="before")
    @classmethod
    def _nulls_and_unknowns(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        fields = cls.model_fields
        unknown = sorted(k for k in data if k not in fields)
        if unknown:
            log.warning(
                "%s: ignoring unknown fields %s", cls.__name__, ", ".join(map(repr, unknown))
            )
        return {
            k: v
            for k, v in data.items()
            if k in fields and not (v is None and not fields[k].is_required())
        }


class ErrorDetail(BaseModel):
    message: str
    type: str
    param: str | None = None
    code: str | int | None = None


class ErrorResponse(BaseModel):
    error: ErrorDetail


def error_body(
    message: str, kind: str, param: str | None = None, code: str | int | None = None
) -> dict:
    return ErrorResponse(
        error=ErrorDetail(message=message, type=kind, param=param, code=code)
    ).model_dump()


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:24]}"


def now_s() -> int:
    return int(time.time())


def usage(num_prompt: int, num_output: int, num_cached: int = 0) -> dict[str, Any]:
    """OpenAI usage; ``prompt_tokens_details.cached_tokens`` counts prompt tokens served
    from a retained checkpoint, as vLLM reports prefix-cache hits."""
    return {
        "prompt_tokens": num_prompt,
        "completion_tokens": num_output,
        "total_tokens": num_prompt + num_output,
        "prompt_tokens_details": {"cached_tokens": num_cached},
    }
