"""Tools whose every call closes within a small budget, for forced-call tests.

A random model under a grammar writes a text value until ``max_tokens`` (nothing makes it
close the string) and spells literal text in short tokens, so these tools have short
names and one required argument each, a bounded integer or an enum: a call of either
ends within about 70 tokens.
"""

from __future__ import annotations

import json

import jsonschema_rs

RAIN = {
    "type": "function",
    "function": {
        "name": "rain",
        "parameters": {
            "type": "object",
            "properties": {"d": {"type": "integer", "minimum": 1, "maximum": 7}},
            "required": ["d"],
            "additionalProperties": False,
        },
    },
}
RING = {
    "type": "function",
    "function": {
        "name": "ring",
        "parameters": {
            "type": "object",
            "properties": {"u": {"type": "string", "enum": ["c", "f"]}},
            "required": ["u"],
            "additionalProperties": False,
        },
    },
}
TOOLS = [RAIN, RING]
SCHEMAS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}


def valid_call(name: str, arguments: str) -> bool:
    """Whether a call names a declared tool and its arguments (JSON text) follow its schema."""
    return name in SCHEMAS and jsonschema_rs.validator_for(SCHEMAS[name]).is_valid(
        json.loads(arguments)
    )
