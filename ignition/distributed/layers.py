"""The parallel layers: a vocabulary-parallel embedding and head, and row-parallel reductions.

Column-parallel projections need no layer of their own: a rank's q/k/v/z/a/b, gate/up and
expert projections are ordinary ``nn.Linear`` modules of the local width (the local config
builds them, the loader fills them with the rank's rows), and every op between them and the
next row-parallel projection is per head or per channel. Row-parallel projections (attention
o_proj, GDN out_proj, an MLP's down_proj, a whole mixture of experts) produce a partial sum;
:func:`reduce_outputs` adds the all-reduce as a forward hook, so the model code is unchanged
and the collective runs inside whatever program calls the module (a captured CUDA graph
records it with the rest).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from ignition.distributed.context import TensorParallel


class VocabParallelEmbedding(nn.Embedding):
    """This rank's ceil(V / world) rows of the embedding; other ranks' ids read zeros, and the
    all-reduce assembles every id's row (exactly one rank holds it)."""

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
    """This rank's vocabulary rows of the output projection; the logits of every rank are
    gathered before anything samples, so each rank samples from the full distribution."""

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
