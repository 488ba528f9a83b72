"""The workspace's buffer table and extents; padding values (slot -1, query length 0, top_p 1)
make an all-padding population harmless."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import torch

from ignition.components.descriptor import Descriptor
from ignition.components.program_kinds import GraphKind
from ignition.model.logits_processing import MAX_LOGIT_BIAS, MAX_STOP_IDS, NO_REPLAY


@dataclass(frozen=True)
class BufferSpec:
    """One workspace buffer: which extent sizes it, its dtype and its padding value."""

    # "rows", "tokens", "prompt", "images", "bias", "stops", "drafts", "mask", "one", "lanes"
    extent: str
    dtype: torch.dtype
    padding: float | int | bool = 0
    # Read only where a per-row flag says so: never reset, uploaded only as far as written.
    is_gated: bool = False


BUFFERS: dict[str, BufferSpec] = {
    "token_ids": BufferSpec("tokens", torch.int64),
    "query_lens": BufferSpec("rows", torch.int32),
    "lane_ceilings": BufferSpec("rows", torch.int32),
    "slot_ids": BufferSpec("rows", torch.int32, -1),
    "pending_tokens": BufferSpec("rows", torch.int64),
    "is_decode_row": BufferSpec("rows", torch.bool, False),
    # one entry per prompt lane (model.packing): its row, and the token after its chunk
    "prefill_row": BufferSpec("lanes", torch.int32, -1),
    "prompt_next_token": BufferSpec("lanes", torch.int64, -1),
    "prompt_length": BufferSpec("lanes", torch.int32),
    "prompt_tokens": BufferSpec("prompt", torch.int64),
    "image_positions": BufferSpec("images", torch.int32, -1),
    # multimodal rope: per-row offset; the chunk's (t, h, w) positions, -1 = not given
    "rope_offset": BufferSpec("rows", torch.int32),
    "prompt_rope": BufferSpec("rope", torch.int32, -1),
    "temperature": BufferSpec("rows", torch.float32),
    "top_k": BufferSpec("rows", torch.int32),
    "top_p": BufferSpec("rows", torch.float32, 1.0),
    "seed": BufferSpec("rows", torch.int64),
    "presence_penalty": BufferSpec("rows", torch.float32),
    "frequency_penalty": BufferSpec("rows", torch.float32),
    "repetition_penalty": BufferSpec("rows", torch.float32, 1.0),
    "min_p": BufferSpec("rows", torch.float32),
    "min_tokens": BufferSpec("rows", torch.int32),
    "history_begin": BufferSpec("lanes", torch.int32, -1),
    "bias_ids": BufferSpec("bias", torch.int64, -1),
    "bias_values": BufferSpec("bias", torch.float32),
    "stop_ids": BufferSpec("stops", torch.int64, -1),
    "replay_from": BufferSpec("lanes", torch.int32, NO_REPLAY),
    # round programs: host-supplied drafts [rows, D] flattened, -1 = none (model.proposals)
    "supplied_drafts": BufferSpec("drafts", torch.int64, -1),
    # structured outputs: masked rows, bitmasks [rows, words] ([rows, W, words] in rounds)
    "is_masked": BufferSpec("rows", torch.bool, False),
    "token_mask": BufferSpec("mask", torch.int32, -1, is_gated=True),
}
BEGIN_BUFFERS = {"history_begin": 1, "bias_ids": MAX_LOGIT_BIAS, "bias_values": MAX_LOGIT_BIAS}
BEGIN_BUFFERS |= {"stop_ids": MAX_STOP_IDS, "replay_from": 1}  # per prompt lane


def lane_table_bytes(max_lanes: int) -> int:
    """Bytes of the per-lane tables beyond one prompt lane, once per catalog."""
    per_lane = {"lanes": 1, "bias": MAX_LOGIT_BIAS, "stops": MAX_STOP_IDS}
    return sum(
        (max_lanes - 1) * per_lane[spec.extent] * spec.dtype.itemsize
        for spec in BUFFERS.values()
        if spec.extent in per_lane
    )


def begin_buffers(lanes: int) -> dict[str, int]:
    """The history-begin buffers of a program with ``lanes`` prompt lanes (lane-major)."""
    return {name: n * lanes for name, n in BEGIN_BUFFERS.items()}


# The per-row sampling buffers every step and round program binds.
SAMPLING_BUFFERS = (
    "temperature",
    "top_k",
    "top_p",
    "seed",
    "presence_penalty",
    "frequency_penalty",
    "repetition_penalty",
    "min_p",
    "min_tokens",
)

Uploads = tuple[tuple[str, int], ...]  # (buffer name, leading length) a program binds


@dataclass(frozen=True)
class WorkspaceExtents:
    """The largest extents any program binds; ``max_image_tokens`` > 0: multimodal inputs."""

    max_rows: int
    max_tokens: int
    max_prompt: int
    max_image_tokens: int = 0
    mask_words: int = 0  # int32 words of one row's grammar bitmask (0: no grammar inputs)
    max_depth: int = 0  # the largest proposal depth D of a round program
    max_width: int = 1  # the largest verify width W of a round program (masks per row)
    max_lanes: int = 1  # the most prompt lanes a program carries (Descriptor.prompt_lanes)

    @property
    def is_multimodal(self) -> bool:
        return self.max_image_tokens > 0

    @classmethod
    def of(cls, descriptors: Iterable[Descriptor], max_image_tokens: int = 0) -> WorkspaceExtents:
        descriptors = list(descriptors)
        if not descriptors:
            raise ValueError("a workspace needs at least one descriptor")
        rows = max(d.row_capacity for d in descriptors)
        tokens = max(
            max(d.max_packed_extent, d.packed_capacity + d.prefill_capacity) for d in descriptors
        )
        lanes = max(d.prompt_lanes for d in descriptors)
        prompt = max(
            (
                d.token_capacity if d.kind is GraphKind.PREFILL else d.prefill_capacity
                for d in descriptors
            ),
            default=0,
        )
        rounds = [
            d
            for d in descriptors
            if d.speculation_enabled and d.kind in (GraphKind.SPECULATIVE, GraphKind.MIXED)
        ]
        depth = max((d.proposal_depth for d in rounds), default=0)
        width = max((d.token_capacity for d in rounds), default=1)
        return cls(rows, tokens, max(prompt, 1), max_image_tokens, 0, depth, width, lanes)

    def length(self, extent: str) -> int:
        return {
            "rows": self.max_rows,
            "tokens": self.max_tokens,
            "prompt": self.max_prompt,
            "images": self.max_image_tokens,
            "bias": MAX_LOGIT_BIAS * self.max_lanes,
            "stops": MAX_STOP_IDS * self.max_lanes,
            "rope": 3 * self.max_prompt if self.is_multimodal else 0,
            "drafts": self.max_rows * self.max_depth,
            "mask": self.max_rows * self.max_width * self.mask_words,
            "one": 1,
            "lanes": self.max_lanes,
        }[extent]
