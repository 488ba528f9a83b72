"""Tools whose every argument closes within a small budget, for forced-call tests.

A random model under a grammar writes a text value until ``max_tokens`` (nothing makes it
close the string), so these tools take enums, bounded integers and booleans only: every
call the grammar admits ends within a few dozen tokens.
"""

from __future__ import annotations

import json

import jsonschema_rs

FORECAST = {
    "type": "function",
    "function": {
        "name": "get_forecast",
        "parameters": {
            "type": "object",
            "properties": {
                "unit": {"type": "string", "enum": ["c", "f"]},
                "days": {"type": "integer", "minimum": 1, "maximum": 7},
            },
            "required": ["unit", "days"],
            "additionalProperties": False,
        },
    },
}
ALARM = {
    "type": "function",
    "function": {
        "name": "set_alarm",
        "parameters": {
            "type": "object",
            "properties": {
                "hour": {"type": "integer", "minimum": 0, "maximum": 23},
                "loud": {"type": "boolean"},
            },
            "required": ["hour"],
            "additionalProperties": False,
        },
    },
}
TOOLS = [FORECAST, ALARM]
SCHEMAS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}


def valid_call(name: str, arguments: str) -> bool:
    """Whether a call names a declared tool and its arguments (JSON text) follow its schema."""
    return name in SCHEMAS and jsonschema_rs.validator_for(SCHEMAS[name]).is_valid(
        json.loads(arguments)
    )
