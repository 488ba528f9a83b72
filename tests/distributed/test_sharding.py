"""Issue 17: each rank loads only its shard of the same checkpoint, and the shards are the
layer splits the design names (attention and GDN heads, MLP and expert widths, vocabulary),
from stored and from fused tensors alike. No process group is needed to load: these run in
one process, in a few seconds."""

from __future__ import annotations

import pytest
import torch

from ignition.distributed.context import TensorParallel
from ignition.distributed.loading import load_sharded_checkpoint
from ignition.distributed.sharding import ShardRule, local_config, shard_rules
from ignition.model.config import ConfigError, ModelConfig
from ignition.model.weights import load_model, write_random_checkpoint

# GDN with two key heads per four value heads, and a vocabulary that does not split evenly.
CONFIG = ModelConfig.tiny(vocab_size=127, linear_num_heads=4, linear_num_key_heads=2)


def reassemble(rule: ShardRule, shards: list[torch.Tensor]) -> torch.Tensor:
    """The whole parameter from the ranks' shards, by the rule's own sections."""
    world = len(shards)
    if rule.padded:
        return torch.cat(shards, rule.dim).narrow(rule.dim, 0, rule.sections[0])
    local = [size // world for size in rule.sections]
    pieces = [s.split(local, rule.dim) for s in shards]  # [rank][section]
    return torch.cat(
        [torch.cat([p[i] for p in pieces], rule.dim) for i in range(len(local))], rule.dim
    )


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    path = tmp_path_factory.mktemp("tp-checkpoint")
    return write_random_checkpoint(path, CONFIG, seed=3)


@pytest.fixture(scope="module")
def fused_qwen35(tmp_path_factory):
    """Qwen3.5 MoE as published: in_proj_qkv, q_proj with its gate, fused expert tensors."""
    pytest.importorskip("transformers")
    from tests.model.hf_checkpoints import Variant, write_qwen35

    path = tmp_path_factory.mktemp("tp-qwen35-moe")
    write_qwen35(path, Variant(moe=True, multimodal=False, fused_experts=True, seed=4))
    return path


@pytest.mark.parametrize("which", ["checkpoint", "fused_qwen35"])
def test_the_two_ranks_shards_reassemble_every_parameter_of_the_checkpoint(which, request):
    checkpoint = request.getfixturevalue(which)
    whole = load_model(checkpoint)
    ranks = [load_sharded_checkpoint(checkpoint, TensorParallel(r, 2)).model for r in (0, 1)]
    rules = shard_rules(whole, whole.config)
    params = [dict(m.named_parameters()) for m in ranks]
    for name, full in whole.named_parameters():
        shards = [p[name].detach() for p in params]
        if name in rules:
            assert shards[0].numel() < full.numel(), name
            torch.testing.assert_close(reassemble(rules[name], shards), full, rtol=0, atol=0)
        else:  # replicated: norms, routers, hyper-connections, per-layer embeddings, MTP fc
            for shard in shards:
                torch.testing.assert_close(shard, full, rtol=0, atol=0)


def test_a_rank_holds_half_the_heads_and_widths_and_its_state_is_sized_by_them(checkpoint):
    rank = load_sharded_checkpoint(checkpoint, TensorParallel(1, 2)).model
    config = rank.config
    assert (config.num_attention_heads, config.num_key_value_heads) == (2, 1)
    assert (config.linear_num_heads, config.num_linear_key_heads) == (2, 1)
    assert config.moe_intermediate_size == CONFIG.moe_intermediate_size // 2
    assert config.vocab_size == CONFIG.vocab_size  # the head gathers the whole vocabulary
    assert rank.embed_tokens.weight.shape[0] == 64  # ceil(127 / 2) rows, the last one padding
    assert torch.count_nonzero(rank.embed_tokens.weight[-1]) == 0


def test_a_width_that_does_not_split_is_one_line_naming_the_config_key(tmp_path):
    with pytest.raises(ValueError, match="num_attention_heads = 4 does not split into 3 ranks"):
        local_config(CONFIG, 3)
    path = write_random_checkpoint(tmp_path, CONFIG, seed=3)
    with pytest.raises(ConfigError, match=r"config\.json: .*num_attention_heads = 4"):
        load_sharded_checkpoint(path, TensorParallel(0, 3))
