"""Which slice of each parameter a rank holds, and the local model (head counts and widths
divided by the world size, contiguous head blocks) that holds it."""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch
from torch import Tensor, nn

from ignition.distributed.context import TensorParallel, TensorParallelError
from ignition.distributed.layers import VocabParallelEmbedding, VocabParallelHead, reduce_outputs
from ignition.model.config import ModelConfig
from ignition.model.layers.gdn import GatedDeltaNet
from ignition.model.layers.moe import MixtureOfExperts, SwiGLU
from ignition.model.layers.qsa import QueryGatedAttention

_DIVIDED = (
    "num_attention_heads",
    "num_key_value_heads",
    "linear_num_heads",
    "linear_num_key_heads",
    "intermediate_size",
    "moe_intermediate_size",
    "shared_expert_intermediate_size",
)


def local_config(config: ModelConfig, world_size: int) -> ModelConfig:
    """The config of one rank's shard; a width that does not split is a one-line error."""
    values = {}
    for name in _DIVIDED:
        value = getattr(config, name)
        if value % world_size:
            raise TensorParallelError(
                f"--tensor-parallel-size {world_size}: config {name} = {value} does not split "
                f"into {world_size} ranks"
            )
        values[name] = value // world_size
    return replace(config, **values)


@dataclass(frozen=True)
class ShardRule:
    """Split along ``dim``; ``sections`` split one by one; ``padded``: ceil(size / world) rows."""

    dim: int
    sections: tuple[int, ...]
    padded: bool = False

    def ranges(self, tp: TensorParallel) -> tuple[list[tuple[int, int]], int]:
        """(global [start, stop) ranges in order, zero rows to append) for rank ``tp.rank``."""
        out, offset, pad = [], 0, 0
        for size in self.sections:
            if self.padded:
                start, stop, width = tp.padded_chunk(size)
                pad += width - (stop - start)
            else:
                start, stop = tp.chunk(size)
            out.append((offset + start, offset + stop))
            offset += size
        return out, pad

    def take(self, full: Tensor, tp: TensorParallel) -> Tensor:
        ranges, pad = self.ranges(tp)
        pieces = [full.narrow(self.dim, start, stop - start) for start, stop in ranges]
        return self._join(pieces, pad)

    def read(self, piece, tp: TensorParallel) -> Tensor:
        """The rank's part of a safetensors slice (``safe_open(...).get_slice(name)``)."""
        ranges, pad = self.ranges(tp)
        lead = (slice(None),) * self.dim
        return self._join([piece[(*lead, slice(a, b))] for a, b in ranges], pad)

    def _join(self, pieces: list[Tensor], pad: int) -> Tensor:
        if pad:
            shape = list(pieces[0].shape)
            shape[self.dim] = pad
            pieces.append(pieces[0].new_zeros(shape))
        return pieces[0] if len(pieces) == 1 else torch.cat(pieces, self.dim)


def shard_rules(model: nn.Module, config: ModelConfig) -> dict[str, ShardRule]:
    """Parameter name -> rule for every split parameter, from the *global* ``config``."""
    rules: dict[str, ShardRule] = {}

    def split(prefix: str, leaf: str, dim: int, *sections: int) -> None:
        rules[f"{prefix}{leaf}"] = ShardRule(dim, sections)

    for name, module in model.named_modules():
        p = f"{name}." if name else ""
        if isinstance(module, QueryGatedAttention):
            heads, kv, dh = config.num_attention_heads, config.num_key_value_heads, config.head_dim
            split(p, "q_proj.weight", 0, heads * dh)
            split(p, "k_proj.weight", 0, kv * dh)
            split(p, "v_proj.weight", 0, kv * dh)
            if module.g_proj is not None:
                split(p, "g_proj.weight", 0, heads * dh)
            split(p, "o_proj.weight", 1, heads * dh)
        elif isinstance(module, GatedDeltaNet):
            keys = config.num_linear_key_heads * config.linear_key_head_dim
            values = config.linear_num_heads * config.linear_value_head_dim
            heads = config.linear_num_heads
            for leaf, size in (("q_proj", keys), ("k_proj", keys), ("v_proj", values)):
                split(p, f"{leaf}.weight", 0, size)
            for leaf, size in (("z_proj", values), ("a_proj", heads), ("b_proj", heads)):
                split(p, f"{leaf}.weight", 0, size)
            split(p, "A_log", 0, heads)
            split(p, "dt_bias", 0, heads)
            split(p, "conv1d.weight", 0, keys, keys, values)
            split(p, "out_proj.weight", 1, values)
        elif isinstance(module, SwiGLU):
            width = module.gate_proj.out_features
            split(p, "gate_proj.weight", 0, width)
            split(p, "up_proj.weight", 0, width)
            split(p, "down_proj.weight", 1, width)
    vocab = config.vocab_size
    rules["embed_tokens.weight"] = ShardRule(0, (vocab,), padded=True)
    rules["lm_head.weight"] = ShardRule(0, (vocab,), padded=True)
    return rules


def parallelize(model: nn.Module, config: ModelConfig, tp: TensorParallel) -> nn.Module:
    """Make a local-config ``model`` one rank of ``config``'s model (before weights load):
    vocabulary-parallel embedding and head, all-reduces after the row-parallel layers."""
    hidden, vocab = config.hidden_size, config.vocab_size
    model.embed_tokens = VocabParallelEmbedding(vocab, hidden, tp)
    model.lm_head = VocabParallelHead(hidden, vocab, tp)
    model.tie_weights()
    modules = list(model.modules())
    in_moe = {id(m) for moe in modules if isinstance(moe, MixtureOfExperts) for m in moe.modules()}
    for module in modules:
        if isinstance(module, QueryGatedAttention):
            reduce_outputs(module.o_proj, tp)
        elif isinstance(module, GatedDeltaNet):
            reduce_outputs(module.out_proj, tp)
        elif isinstance(module, MixtureOfExperts):
            reduce_outputs(module, tp)  # routed and shared experts' partial sums, once
        elif isinstance(module, SwiGLU) and id(module) not in in_moe:
            reduce_outputs(module.down_proj, tp)
    model.tensor_parallel = tp
    return model
