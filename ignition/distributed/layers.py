"""The parallel layers: vocabulary-parallel embedding and head, row-parallel all-reduce hooks."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from ignition.distributed.context import TensorParallel


class VocabParallelEmbedding(nn.Embedding):
    """This rank's ceil(V / world) embedding rows; the all-reduce assembles every id's row."""

    def __init__(self, vocab_size: int, hidden: int, tp: TensorParallel) -> None:
        start, stop, width = tp.padded_chunk(vocab_size)
        super().__init__(width, hidden)
        self.vocab_start, self.vocab_stop = start, stop
        self.tp = tp

    def forward(self, ids: Tensor) -> Tensor:
        local = ids - self.vocab_start
        is_here = (ids >= self.vocab_start) & (ids < self.vocab_stop)
        rows = super().forward(torch.where(is_here, local, 0))
        rows = rows * is_here.unsqueeze(-1).to(rows.dtype)
        return self.tp.all_reduce(rows)


class VocabParallelHead(nn.Linear):
    """This rank's vocabulary rows of the head; logits are gathered before sampling."""

    def __init__(self, hidden: int, vocab_size: int, tp: TensorParallel) -> None:
        _, _, width = tp.padded_chunk(vocab_size)
        super().__init__(hidden, width, bias=False)
        self.vocab_size = vocab_size
        self.tp = tp

    def forward(self, hidden: Tensor) -> Tensor:
        local = super().forward(hidden).contiguous()  # [..., V / world]
        return self.tp.all_gather_last(local)[..., : self.vocab_size]


def reduce_outputs(module: nn.Module, tp: TensorParallel) -> None:
    """Sum ``module``'s output over the ranks after each call (a row-parallel layer)."""

    def hook(_module: nn.Module, _inputs: tuple, output: Tensor) -> Tensor:
        return tp.all_reduce(output)

    module.register_forward_hook(hook)
