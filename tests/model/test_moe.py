"""MoE dispatch (issue 16): the capture-safe fixed-capacity path against the host-grouped
reference, the path the layer took before."""

from __future__ import annotations

import pytest
import torch

from ignition.compiler.host_sync import HostSyncDetector
from ignition.model.config import ModelConfig
from ignition.model.layers.moe import MixtureOfExperts

TOLERANCE = {torch.float32: 1e-5, torch.bfloat16: 2e-2}


def _moe(dtype: torch.dtype = torch.float32, num_experts: int = 8) -> MixtureOfExperts:
    torch.manual_seed(0)
    return MixtureOfExperts(ModelConfig.tiny(num_experts=num_experts)).to(dtype).eval()


def _tokens(moe: MixtureOfExperts, n: int, dtype: torch.dtype) -> torch.Tensor:
    generator = torch.Generator().manual_seed(n)
    return torch.randn(n, moe.gate.in_features, generator=generator).to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("num_tokens", [1, 63, 500])
def test_fixed_capacity_dispatch_matches_the_host_grouped_reference(num_tokens, dtype):
    moe = _moe(dtype)
    x = _tokens(moe, num_tokens, dtype)
    with torch.no_grad():
        assert moe.can_dispatch_grouped(x)
        got = moe.routed_fixed_capacity(x)
        want = moe.routed_host_grouped(x)
    tol = TOLERANCE[dtype]
    torch.testing.assert_close(got, want, atol=tol, rtol=tol)


def test_fixed_capacity_dispatch_handles_experts_no_token_chose():
    moe = _moe(num_experts=16)
    x = _tokens(moe, 2, torch.float32)  # 4 assignments over 16 experts: most groups empty
    with torch.no_grad():
        torch.testing.assert_close(
            moe.routed_fixed_capacity(x), moe.routed_host_grouped(x), atol=1e-5, rtol=1e-5
        )


def test_inference_moe_never_syncs_with_the_host():
    moe = _moe()
    x = _tokens(moe, 37, torch.float32)
    with torch.no_grad(), HostSyncDetector("moe") as detector:
        moe(x)
    assert detector.violations == []


def test_stacked_expert_weights_follow_parameter_updates():
    moe = _moe()
    x = _tokens(moe, 9, torch.float32)
    with torch.no_grad():
        before = moe.routed_fixed_capacity(x)
        for expert in moe.experts:
            expert.down_proj.weight.mul_(2.0)
        after = moe.routed_fixed_capacity(x)
        torch.testing.assert_close(after, moe.routed_host_grouped(x), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(after, before * 2, atol=1e-5, rtol=1e-5)


def test_training_keeps_gradients_to_every_routed_expert():
    moe = _moe()
    x = _tokens(moe, 40, torch.float32)
    moe(x).sum().backward()
    assert sum(e.gate_proj.weight.grad is not None for e in moe.experts) >= 2
