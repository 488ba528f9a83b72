"""Static hyper-connections: the residual stream is ``hc_streams`` parallel copies.

A block reads its input as a learned mix of the streams, and its output is added back into
every stream with a learned per-stream weight, after a learned stream-to-stream mix of the
residual itself. Identity residual mixing, uniform read and unit write weights reproduce a
plain residual connection, which is the initialisation.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn


class HyperConnection(nn.Module):
    def __init__(self, num_streams: int) -> None:
        super().__init__()
        self.read_weight = nn.Parameter(torch.full((num_streams,), 1.0 / num_streams))
        self.mix_weight = nn.Parameter(torch.eye(num_streams))
        self.write_weight = nn.Parameter(torch.ones(num_streams))

    def read(self, streams: Tensor) -> Tensor:
        """streams [T, S, hidden] -> block input [T, hidden]."""
        return torch.einsum("tsh,s->th", streams, self.read_weight.to(streams.dtype))

    def write(self, streams: Tensor, block_out: Tensor) -> Tensor:
        """streams [T, S, hidden], block_out [T, hidden] -> new streams [T, S, hidden]."""
        mixed = torch.einsum("tsh,os->toh", streams, self.mix_weight.to(streams.dtype))
        return mixed + self.write_weight.to(streams.dtype)[None, :, None] * block_out[:, None, :]
