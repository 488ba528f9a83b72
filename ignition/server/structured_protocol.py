"""Structured-output request fields: OpenAI's ``response_format``, vLLM's
``structured_outputs`` and ``guided_*``; at most one per request, each a ``GrammarSpec``
whose ``field`` a 400 names (docs/server.md, "Structured outputs").
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ignition.runtime.grammar import GrammarSpec

STRUCTURED_FIELDS = ("json", "regex", "choice", "grammar", "json_object")
NOT_SERVED = ("structural_tag", "whitespace_pattern")
Choice = Annotated[str, Field(strict=True)]


class _Part(BaseModel):
    """Nulls are absent; unknown fields are ignored (as in the request bodies)."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    @model_validator(mode="before")
    @classmethod
    def _nulls(cls, data: Any) -> Any:
        if isinstance(data, dict):
            return {k: v for k, v in data.items() if v is not None}
        return data


def schema_text(value: Any) -> str:
    """A JSON schema given as an object or as JSON text, as JSON text."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as err:
            raise ValueError(
                f"is not valid JSON (a structured output schema): {err.msg} at character {err.pos}"
            ) from None
    if not isinstance(value, dict | bool):
        raise ValueError("must be a JSON schema (an object) for structured outputs")
    return json.dumps(value)


class JsonSchemaFormat(_Part):
    name: Annotated[str, Field(strict=True, max_length=64)] = "response"
    description: str | None = None
    schema_: dict[str, Any] = Field(alias="schema", default_factory=dict)
    strict: Annotated[bool, Field(strict=True)] | None = None


# The validators' rule in the published schema (server/schema_rules.py's convention):
# ``json_schema`` is given exactly when ``type`` is "json_schema".
_JSON_SCHEMA_WITH_ITS_TYPE = [
    {
        "anyOf": [
            {"properties": {"json_schema": {"type": "null"}}},
            {"properties": {"type": {"const": "json_schema"}}, "required": ["type"]},
        ]
    },
    {
        "anyOf": [
            {"properties": {"type": {"enum": ["text", "json_object"]}}},
            {"properties": {"json_schema": {"type": "object"}}, "required": ["json_schema"]},
        ]
    },
]


class ResponseFormat(_Part):
    model_config = ConfigDict(json_schema_extra={"allOf": _JSON_SCHEMA_WITH_ITS_TYPE})

    type: Literal["text", "json_object", "json_schema"]
    json_schema: JsonSchemaFormat | None = None

    @field_validator("json_schema")
    @classmethod
    def _schema_with_its_type(cls, value: JsonSchemaFormat | None, info) -> Any:
        if value is not None and info.data.get("type") != "json_schema":
            raise ValueError("is only allowed with type 'json_schema'")
        return value

    @model_validator(mode="after")
    def _json_schema_given(self) -> ResponseFormat:
        if self.type == "json_schema" and self.json_schema is None:
            raise ValueError("type 'json_schema' needs a json_schema object with its schema")
        return self

    def grammar(self) -> GrammarSpec | None:
        if self.type == "json_object":
            return GrammarSpec("json_object", "", "response_format")
        if self.type == "json_schema" and self.json_schema is not None:
            source = json.dumps(self.json_schema.schema_)
            return GrammarSpec("json_schema", source, "response_format.json_schema")
        return None


class StructuredOutputs(_Part):
    """vLLM's ``structured_outputs`` object (exactly one constraint)."""

    json_: Any = Field(default=None, alias="json")
    regex: Annotated[str, Field(strict=True)] | None = None
    choice: Annotated[list[Choice], Field(min_length=1)] | None = None
    grammar: Annotated[str, Field(strict=True, min_length=1)] | None = None
    json_object: Annotated[bool, Field(strict=True)] | None = None
    disable_any_whitespace: Annotated[bool, Field(strict=True)] | None = None
    structural_tag: Any = None
    whitespace_pattern: Any = None

    @field_validator("json_")
    @classmethod
    def _schema(cls, value: Any) -> Any:
        return None if value is None else schema_text(value)

    @field_validator(*NOT_SERVED)
    @classmethod
    def _not_served(cls, value: Any, info) -> Any:
        if value is not None:
            raise ValueError(
                f"{info.field_name} is not supported for structured outputs: send json, "
                "regex, choice, grammar or json_object"
            )
        return value

    @model_validator(mode="after")
    def _exactly_one(self) -> StructuredOutputs:
        given = [name for name in STRUCTURED_FIELDS if self._value(name) not in (None, False)]
        if len(given) != 1:
            found = ", ".join(given) or "none"
            raise ValueError(
                f"a structured output constraint needs exactly one of "
                f"{', '.join(STRUCTURED_FIELDS)}; got {found}"
            )
        return self

    def _value(self, name: str) -> Any:
        return self.json_ if name == "json" else getattr(self, name)

    def grammar_spec(self) -> GrammarSpec:
        compact = self.disable_any_whitespace is not False
        where = "structured_outputs"
        if self.json_ is not None:
            return GrammarSpec("json_schema", self.json_, f"{where}.json", not compact)
        if self.regex is not None:
            return GrammarSpec("regex", self.regex, f"{where}.regex")
        if self.choice is not None:
            return GrammarSpec("choice", json.dumps(self.choice), f"{where}.choice")
        if self.grammar is not None:
            return GrammarSpec("grammar", self.grammar, f"{where}.grammar")
        return GrammarSpec("json_object", "", f"{where}.json_object", not compact)


def guided_spec(field: str, value: Any) -> GrammarSpec:
    """The GrammarSpec of one of vLLM's older ``guided_*`` fields (validated values)."""
    if field == "guided_json":
        return GrammarSpec("json_schema", value, field)
    if field == "guided_choice":
        return GrammarSpec("choice", json.dumps(value), field)
    return GrammarSpec("regex" if field == "guided_regex" else "grammar", value, field)
