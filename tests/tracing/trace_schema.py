"""The Chrome trace-event format's documented fields, checked by hand (the "Trace Event
Format" document: every event has ``ph``, ``ts`` in microseconds, ``pid``, ``tid`` and
``name``; complete events "X" add ``dur``; counters "C" carry numeric ``args`` per series;
metadata "M" names a process or thread through ``args.name``)."""

from __future__ import annotations

import json
import math
from typing import Any

PHASES = {"X", "C", "M"}  # the phases this exporter writes
METADATA_NAMES = {"process_name", "thread_name", "process_sort_index", "thread_sort_index"}


def schema_errors(document: Any) -> list[str]:
    """Every violation in a trace document (object form); empty when it conforms."""
    if not isinstance(document, dict) or not isinstance(document.get("traceEvents"), list):
        return ["the document is not an object with a traceEvents list"]
    errors: list[str] = []
    unit = document.get("displayTimeUnit", "ms")
    if unit not in ("ms", "ns"):
        errors.append(f"displayTimeUnit {unit!r}: must be ms or ns")
    for i, event in enumerate(document["traceEvents"]):
        errors += [f"event {i}: {e}" for e in _event_errors(event)]
    json.dumps(document, allow_nan=False)  # NaN/Infinity are not JSON
    return errors


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _event_errors(event: Any) -> list[str]:
    if not isinstance(event, dict):
        return ["not an object"]
    errors = []
    ph = event.get("ph")
    if ph not in PHASES:
        return [f"ph {ph!r} is not one of {sorted(PHASES)}"]
    if not isinstance(event.get("name"), str) or not event["name"]:
        errors.append("name must be a nonempty string")
    for key in ("pid", "tid") if ph != "C" else ("pid",):
        if not isinstance(event.get(key), int) or isinstance(event.get(key), bool):
            errors.append(f"{key} must be an integer")
    if not _number(event.get("ts")) or event["ts"] < 0:
        errors.append("ts must be a nonnegative number of microseconds")
    args = event.get("args", {})
    if not isinstance(args, dict):
        errors.append("args must be an object")
        args = {}
    if ph == "X" and (not _number(event.get("dur")) or event["dur"] < 0):
        errors.append("a complete event needs a nonnegative dur")
    if ph == "C":
        if not args or not all(_number(v) for v in args.values()):
            errors.append("a counter's args must be numeric series values")
    if ph == "M":
        if event.get("name") not in METADATA_NAMES:
            errors.append(f"metadata name {event.get('name')!r} is not a known one")
        if not isinstance(args.get("name"), str) and "sort_index" not in args:
            errors.append("metadata needs args.name")
    return errors
