"""What the server hands the engine and what the engine streams back."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ignition.runtime.proposals.registry import check_method
from ignition.runtime.requests.errors import RequestError

if TYPE_CHECKING:
    from ignition.runtime.grammar import RequestGrammar
    from ignition.runtime.vision.inputs import RequestImages

# Limits of the device sampling stage (model.logits_processing): alternatives per token,
# logit-bias entries, and stop token ids min_tokens can mask (EOS ids take the rest).
MAX_LOGPROBS = 20
MAX_LOGIT_BIAS = 300
MAX_MIN_TOKENS_STOP_IDS = 56
# Repetition penalty bounds, symmetric in log space; beyond them fp32 logits overflow.
MIN_REPETITION_PENALTY = 0.01
MAX_REPETITION_PENALTY = 100.0
# As vLLM: a positive temperature below this is raised to it (logits would overflow).
MIN_TEMPERATURE = 0.01


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
    # Logits processing on the device (model.logits_processing), vLLM's semantics.
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    repetition_penalty: float = 1.0
    min_p: float = 0.0
    min_tokens: int = 0
    logit_bias: tuple[tuple[int, float], ...] = ()  # (token id, bias) pairs
    # Raw logprobs of each output token with this many alternatives (None: not reported).
    logprobs: int | None = None
    # Raw logprobs of every prompt token after the first (its rank and this many most
    # likely alternatives at each position; None: not reported). Such a request never
    # restores a retained prefix: a restored prefix has no hidden states to score.
    prompt_logprobs: int | None = None
    # Structured outputs: the compiled grammar every output token must follow (None: free
    # text). Its rows are masked on the device and verify only the drafts its grammar
    # forces, each position under its own mask (runtime/grammar.py).
    grammar: RequestGrammar | None = None
    # The proposal sources of its speculative rounds, by a method registered in
    # runtime/proposals/registry.py ("mtp", "ngram", "both"). A constrained request
    # verifies its grammar's forced drafts whatever this says.
    speculative_method: str = "mtp"

    def __post_init__(self) -> None:
        check_method(self.speculative_method)
        if self.max_tokens < 1:
            raise RequestError(f"max_tokens = {self.max_tokens}: must be at least 1")
        if not (math.isfinite(self.temperature) and self.temperature >= 0):
            raise RequestError(f"temperature = {self.temperature}: must be finite and >= 0")
        if 0 < self.temperature < MIN_TEMPERATURE:
            object.__setattr__(self, "temperature", MIN_TEMPERATURE)
        if not (0 < self.top_p <= 1):
            raise RequestError(f"top_p = {self.top_p}: must be in (0, 1]")
        if self.top_k < 0:
            raise RequestError(f"top_k = {self.top_k}: must be >= 0 (0 disables it)")
        for name in ("presence_penalty", "frequency_penalty"):
            value = getattr(self, name)
            if not (math.isfinite(value) and -2 <= value <= 2):
                raise RequestError(f"{name} = {value}: must be in [-2, 2]")
        penalty, low, high = self.repetition_penalty, MIN_REPETITION_PENALTY, MAX_REPETITION_PENALTY
        if not (math.isfinite(penalty) and low <= penalty <= high):
            raise RequestError(f"repetition_penalty = {penalty}: must be in [{low}, {high}]")
        if not (math.isfinite(self.min_p) and 0 <= self.min_p <= 1):
            raise RequestError(f"min_p = {self.min_p}: must be in [0, 1]")
        if not 0 <= self.min_tokens <= self.max_tokens:
            raise RequestError(
                f"min_tokens = {self.min_tokens}: must be in [0, max_tokens = {self.max_tokens}]"
            )
        if len(self.logit_bias) > MAX_LOGIT_BIAS:
            raise RequestError(
                f"logit_bias has {len(self.logit_bias)} entries; at most {MAX_LOGIT_BIAS}"
            )
        if self.min_tokens and len(self.stop_token_ids) > MAX_MIN_TOKENS_STOP_IDS:
            raise RequestError(
                f"min_tokens with {len(self.stop_token_ids)} stop_token_ids: at most "
                f"{MAX_MIN_TOKENS_STOP_IDS} can be held back"
            )
        for token, bias in self.logit_bias:
            if token < 0 or not math.isfinite(bias):
                raise RequestError(f"logit_bias[{token}] = {bias}: needs an id >= 0, finite bias")
        if self.logprobs is not None and not 0 <= self.logprobs <= MAX_LOGPROBS:
            raise RequestError(f"logprobs = {self.logprobs}: must be in [0, {MAX_LOGPROBS}]")
        if self.prompt_logprobs is not None and not 0 <= self.prompt_logprobs <= MAX_LOGPROBS:
            raise RequestError(
                f"prompt_logprobs = {self.prompt_logprobs}: must be in [0, {MAX_LOGPROBS}]"
            )

    @property
    def has_host_stops(self) -> bool:
        """Stop strings end a request on the host, so each frame waits for the previous one."""
        return bool(self.stop)

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
class TokenLogprob:
    """The raw logprob of one output token and its most likely alternatives, best first."""

    token_id: int
    logprob: float
    top: tuple[tuple[int, float], ...] = ()


@dataclass(frozen=True)
class PromptLogprob:
    """The raw logprob of one prompt token, its rank and the best alternatives there."""

    token_id: int
    logprob: float
    rank: int
    top: tuple[tuple[int, float], ...] = ()


@dataclass(frozen=True)
class StreamChunk:
    """One published burst: visible text, its token ids, and running usage counts."""

    text: str
    token_ids: tuple[int, ...]
    num_prompt_tokens: int
    num_output_tokens: int
    finish_reason: str | None = None
    error: str | None = None
    num_cached_tokens: int = 0  # prompt tokens restored from a retained checkpoint
    stop_reason: int | str | None = None
    # One per token id when the request asked for logprobs, else empty.
    logprobs: tuple[TokenLogprob, ...] = ()
    # On a request's first chunk when it asked for prompt logprobs: one entry per prompt
    # token, None for the first (nothing precedes it); None on every other chunk.
    prompt_logprobs: tuple[PromptLogprob | None, ...] | None = None
