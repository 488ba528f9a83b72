"""Token streams of the corpus and the deterministic batch order of a training run.

Each file is encoded on its own and closed with ``<|endoftext|>``, so a training window
that crosses a file boundary sees the same separator a served request would. Windows are
drawn at offsets from a seeded generator: the same seed gives the same batches on any
machine, independent of thread count.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import torch
from tokenizers import Tokenizer

END_OF_TEXT = "<|endoftext|>"


@dataclass(frozen=True)
class TokenStream:
    """All files of one split, encoded and concatenated: ids [N] int64."""

    ids: torch.Tensor

    @classmethod
    def encode(cls, tokenizer: Tokenizer, files: tuple[Path, ...]) -> TokenStream:
        end = tokenizer.token_to_id(END_OF_TEXT)
        pieces = [torch.tensor([*ids, end]) for ids in encode_files(tokenizer, files)]
        return cls(torch.cat(pieces).long())

    def __len__(self) -> int:
        return self.ids.numel()

    def windows(self, seq_len: int, max_windows: int | None = None) -> torch.Tensor:
        """Consecutive non-overlapping windows [n, seq_len] from the start (evaluation)."""
        count = len(self) // seq_len
        if max_windows is not None:
            count = min(count, max_windows)
        if count == 0:
            raise ValueError(f"stream of {len(self)} tokens is shorter than one {seq_len} window")
        return self.ids[: count * seq_len].view(count, seq_len)


def encode_files(tokenizer: Tokenizer, files: tuple[Path, ...]) -> list[list[int]]:
    """The token ids of each file on its own."""
    texts = [p.read_text(encoding="utf-8", errors="replace") for p in files]
    return [encoding.ids for encoding in tokenizer.encode_batch(texts)]


def training_batches(
    stream: TokenStream, batch_size: int, seq_len: int, num_steps: int, seed: int
) -> Iterator[torch.Tensor]:
    """``num_steps`` batches [batch_size, seq_len] of random windows, in a seeded order."""
    if len(stream) <= seq_len:
        raise ValueError(f"stream of {len(stream)} tokens is too short for windows of {seq_len}")
    generator = torch.Generator().manual_seed(seed)
    columns = torch.arange(seq_len)
    for _ in range(num_steps):
        starts = torch.randint(0, len(stream) - seq_len, (batch_size,), generator=generator)
        yield stream.ids[starts[:, None] + columns[None, :]]
