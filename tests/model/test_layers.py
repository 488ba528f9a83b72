"""Layer-level behaviour: MoE routing, the plain residual, partial rotary."""

from __future__ import annotations

import torch

from ignition.model.layers.decoder import PlainResidual
from ignition.model.layers.moe import MixtureOfExperts
from ignition.model.layers.rope import PartialRotary


def _moe(model) -> MixtureOfExperts:
    return model.layers[0].mlp


def test_routing_weights_are_renormalised_over_the_top_k(config, model):
    x = torch.randn(9, config.hidden_size, generator=torch.Generator().manual_seed(1))
    weights, experts = _moe(model).route(x)
    assert experts.shape == (9, config.num_experts_per_tok)
    torch.testing.assert_close(weights.sum(-1), torch.ones(9))


def test_grouped_experts_equal_every_expert_run_densely(config, model):
    moe = _moe(model)
    x = torch.randn(17, config.hidden_size, generator=torch.Generator().manual_seed(2))
    grouped, dense = moe.routed_host_grouped(x), moe.routed_dense(x)
    torch.testing.assert_close(grouped, dense, atol=1e-5, rtol=1e-5)


def test_moe_is_a_token_wise_map(config, model):
    moe = _moe(model)
    x = torch.randn(6, config.hidden_size, generator=torch.Generator().manual_seed(3))
    together = moe(x)
    one_by_one = torch.cat([moe(x[i : i + 1]) for i in range(6)])
    torch.testing.assert_close(together, one_by_one, atol=1e-5, rtol=1e-5)


def test_the_plain_residual_adds_the_block_output_to_its_one_stream():
    streams = torch.randn(5, 1, 8)
    out = PlainResidual().around(streams, lambda x: 2 * x + 1)
    torch.testing.assert_close(out, streams + 2 * streams + 1)


def test_partial_rotary_leaves_the_pass_through_channels_and_norms():
    rotary = PartialRotary(head_dim=16, rotary_dim=8, theta=10000.0)
    x = torch.randn(4, 2, 16)
    y = rotary(x, torch.tensor([0, 1, 7, 300]))
    torch.testing.assert_close(y[..., 8:], x[..., 8:])
    torch.testing.assert_close(y[0], x[0])  # position 0 does not rotate
    torch.testing.assert_close(y[..., :8].norm(dim=-1), x[..., :8].norm(dim=-1))
