"""Sampling defaults from a checkpoint's ``generation_config.json``."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ignition.runtime.requests.request import SamplingParams

GENERATION_CONFIG_FILE = "generation_config.json"


class GenerationConfigError(ValueError):
    """A generation_config.json that cannot be read as stated."""


@dataclass(frozen=True)
class GenerationDefaults:
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    eos_token_ids: tuple[int, ...] = ()
    # Applied on the device like a request's own (vLLM reads these two from the file too).
    repetition_penalty: float | None = None
    min_p: float | None = None
    # Not from the file: the server's --speculative-method, for requests that name none.
    speculative_method: str | None = None

    def apply(self, sampling: SamplingParams, given: Collection[str]) -> SamplingParams:
        """``sampling`` with each field the request did not give taken from the file."""
        chosen = {
            name: value
            for name, value in (
                ("temperature", self.temperature),
                ("top_p", self.top_p),
                ("top_k", self.top_k),
                ("repetition_penalty", self.repetition_penalty),
                ("min_p", self.min_p),
                ("speculative_method", self.speculative_method),
            )
            if value is not None and name not in given
        }
        return dataclasses.replace(sampling, **chosen) if chosen else sampling


def _number(path: Path, config: dict[str, Any], key: str, low: float, high: float) -> float | None:
    value = config.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise GenerationConfigError(f"{path}: {key} = {value!r}: expected a number")
    if not low <= value <= high:
        raise GenerationConfigError(f"{path}: {key} = {value!r}: must be in [{low}, {high}]")
    return float(value)


def _eos_ids(path: Path, value: Any) -> tuple[int, ...]:
    if value is None:
        return ()
    ids = [value] if not isinstance(value, list) else value
    if any(isinstance(i, bool) or not isinstance(i, int) or i < 0 for i in ids):
        raise GenerationConfigError(
            f"{path}: eos_token_id = {value!r}: expected a token id or a list of them"
        )
    return tuple(sorted(set(ids)))


def load_generation_defaults(folder: Path) -> GenerationDefaults:
    """The defaults ``folder/generation_config.json`` states; none when the file is absent."""
    path = folder / GENERATION_CONFIG_FILE
    if not path.is_file():
        return GenerationDefaults()
    try:
        config = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise GenerationConfigError(f"{path}: not valid JSON ({err})") from None
    if not isinstance(config, dict):
        raise GenerationConfigError(f"{path}: expected a JSON object")
    temperature = _number(path, config, "temperature", 0.0, 100.0)
    top_p = _number(path, config, "top_p", 0.0, 1.0)
    if top_p == 0.0:
        raise GenerationConfigError(f"{path}: top_p = 0: must be in (0, 1]")
    top_k = _number(path, config, "top_k", 0, 1 << 31)
    if top_k is not None and top_k != int(top_k):
        raise GenerationConfigError(f"{path}: top_k = {config['top_k']!r}: expected an integer")
    repetition_penalty = _number(path, config, "repetition_penalty", 0.0, 100.0)
    if repetition_penalty == 0.0:
        raise GenerationConfigError(f"{path}: repetition_penalty = 0: must be > 0")
    min_p = _number(path, config, "min_p", 0.0, 1.0)
    do_sample = config.get("do_sample")
    if do_sample is not None and not isinstance(do_sample, bool):
        raise GenerationConfigError(f"{path}: do_sample = {do_sample!r}: expected true or false")
    if do_sample is False:
        temperature = 0.0
    return GenerationDefaults(
        temperature=temperature,
        top_p=top_p,
        top_k=int(top_k) if top_k is not None else None,
        eos_token_ids=_eos_ids(path, config.get("eos_token_id")),
        repetition_penalty=repetition_penalty,
        min_p=min_p,
    )
