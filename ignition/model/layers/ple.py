"""Per-layer embeddings: a second token table whose row holds one small vector per layer.

Layer l adds a projection of its ``ple_dim`` slice to its block input. The table lookup is
per token, so PLE rows travel with their tokens through the packed layout.
"""

from __future__ import annotations

from torch import Tensor, nn

from ignition.model.config import Qwen38Config


class PerLayerEmbedding(nn.Module):
    """The shared table; each decoder layer owns its own projection (``ple_proj``)."""

    def __init__(self, config: Qwen38Config) -> None:
        super().__init__()
        self.num_layers = config.num_hidden_layers
        self.ple_dim = config.ple_dim
        self.embed = nn.Embedding(config.vocab_size, config.num_hidden_layers * config.ple_dim)

    def forward(self, token_ids: Tensor) -> Tensor:
        """token_ids [T] -> [T, layers, ple_dim]."""
        return self.embed(token_ids).view(-1, self.num_layers, self.ple_dim)
