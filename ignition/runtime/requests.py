"""What the server hands the engine and what the engine streams back.

Plain data only, so the HTTP layer and the engine loop meet at one seam and
either can be tested without the other.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ignition.runtime.image_inputs import RequestImages


class RequestError(ValueError):
    """A request the engine cannot serve as asked (maps to HTTP 400)."""


class QueueFullError(RuntimeError):
    """The engine has no room for another waiting request (maps to HTTP 503)."""


class EngineStoppedError(RuntimeError):
    """The engine loop has stopped and takes no more requests (maps to HTTP 503)."""


@dataclass(frozen=True)
class SamplingParams:
    """Per-request sampling; temperature 0 is greedy and ignores top-k/top-p."""

    max_tokens: int = 16
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    seed: int | None = None
    stop: tuple[str, ...] = ()
    ignore_eos: bool = False
    # Generating one of these ends the request like a stop string (it is not shown).
    stop_token_ids: tuple[int, ...] = ()
    include_stop_str_in_output: bool = False
    skip_special_tokens: bool = True

    def __post_init__(self) -> None:
        if self.max_tokens < 1:
            raise RequestError(f"max_tokens = {self.max_tokens}: must be at least 1")
        if not (math.isfinite(self.temperature) and self.temperature >= 0):
            raise RequestError(f"temperature = {self.temperature}: must be finite and >= 0")
        if not (0 < self.top_p <= 1):
            raise RequestError(f"top_p = {self.top_p}: must be in (0, 1]")
        if self.top_k < 0:
            raise RequestError(f"top_k = {self.top_k}: must be >= 0 (0 disables it)")

    @property
    def is_greedy(self) -> bool:
        return self.temperature == 0


@dataclass(frozen=True)
class GenerationRequest:
    request_id: str
    prompt_ids: tuple[int, ...]
    sampling: SamplingParams = field(default_factory=SamplingParams)
    # Where each rendered chat message ends (prompt token counts): checkpoint anchors.
    message_end_offsets: tuple[int, ...] = ()
    # Images (placeholders already expanded in ``prompt_ids``); None for a text prompt.
    images: RequestImages | None = None

    def __post_init__(self) -> None:
        if not self.prompt_ids:
            raise RequestError("the prompt is empty: at least one token is needed")


@dataclass(frozen=True)
class StreamChunk:
    """One published burst: visible text, its token ids, and running usage counts.

    ``finish_reason`` is set on the last chunk: ``stop`` (end of sequence or a stop
    string), ``length`` (max_tokens or context), ``abort`` (cancelled) or ``error``
    (execution failed; ``error`` says why, and no other request is affected).
    ``stop_reason`` names what stopped a ``stop``: the stop string or stop token id
    (None for end of sequence).
    """

    text: str
    token_ids: tuple[int, ...]
    num_prompt_tokens: int
    num_output_tokens: int
    finish_reason: str | None = None
    error: str | None = None
    num_cached_tokens: int = 0  # prompt tokens restored from a retained checkpoint
    stop_reason: int | str | None = None
