"""vLLM V1's CUDA-graph capture sizes, so a baseline can pay for padding as Helios
does: a step of at most the largest size runs at the smallest size holding it, a larger
one eagerly (the rule: docs/simulate.md, "capture.py")."""

from __future__ import annotations

import bisect
from dataclasses import dataclass

VLLM_MAX_CAPTURE_SIZE = 512  # vLLM's cap on the default largest capture size


@dataclass(frozen=True)
class CaptureSizes:
    """Token counts with a captured graph, ascending."""

    sizes: tuple[int, ...]

    @property
    def largest(self) -> int:
        return self.sizes[-1] if self.sizes else 0

    def pad(self, tokens: int) -> int:
        """The tokens the device runs: the smallest capture size holding ``tokens``, or
        ``tokens`` itself (eager) above the largest."""
        i = bisect.bisect_left(self.sizes, tokens)
        return self.sizes[i] if i < len(self.sizes) else tokens


def vllm_capture_sizes(
    max_num_seqs: int, drafts: int = 0, max_num_batched_tokens: int = 2048
) -> CaptureSizes:
    """vLLM V1's default capture sizes for these scheduler settings."""
    query_len = 1 + drafts
    largest = min(max_num_seqs * query_len * 2, VLLM_MAX_CAPTURE_SIZE, max_num_batched_tokens)
    base = [s for s in (1, 2, 4) if s <= largest]
    base += list(range(8, min(largest + 1, 256), 8))
    base += list(range(256, largest + 1, 16))
    if query_len > 1:
        rounded = {-(-s // query_len) * query_len for s in base}
        base = [s for s in rounded if s <= largest] or ([query_len] if query_len <= largest else [])
    return CaptureSizes(tuple(sorted(set(base))))
