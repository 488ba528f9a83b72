"""The host-sync detector: every capture-unsafe operation raises, the safe forms pass."""

from __future__ import annotations

import pytest
import torch

from ignition.compiler.host_sync import HostSyncDetector, HostSyncError

X = torch.tensor([1.0, 2.0, -1.0, 3.0])

UNSAFE = {
    ".item()": lambda x: x.sum().item(),
    ".tolist()": lambda x: x.tolist(),
    "int(tensor)": lambda x: int(x[0]),
    "float(tensor)": lambda x: float(x[0]),
    "bool(tensor)": lambda x: bool(x[0] > 0),
    "a branch on a tensor": lambda x: 1 if (x > 0).any() else 0,
    "nonzero": lambda x: x.nonzero(),
    "where(mask)": lambda x: torch.where(x > 0),
    "boolean masking": lambda x: x[x > 0],
    "boolean-mask assignment": lambda x: x.clone().__setitem__(x > 0, 1.0),
    "repeat_interleave without output_size": lambda x: x.repeat_interleave(x.long().abs()),
    "bincount": lambda x: torch.bincount(x.long().abs()),
    "unique": lambda x: torch.unique(x),
    "host data": lambda x: torch.tensor([1, 2]),
    "a data-sized allocation": lambda x: torch.zeros(x.long()[1]),
    "a data-sized slice": lambda x: x[: x.long()[1]],
    "torch.equal": lambda x: torch.equal(x, x),
}

SAFE = {
    "repeat_interleave with output_size": lambda x: x.repeat_interleave(
        x.long().abs(), output_size=7
    ),
    "integer-tensor gather": lambda x: x[x.long().abs().clamp(max=3)],
    "where(mask, a, b)": lambda x: torch.where(x > 0, x, 0),
    "topk and sort": lambda x: (x.topk(2), x.sort()),
    "shape-sized allocation": lambda x: x.new_zeros(x.shape[0]),
    "scatter_add counts": lambda x: torch.zeros(4).scatter_add_(0, x.long().abs(), x),
}


@pytest.mark.parametrize("name", list(UNSAFE))
def test_the_detector_raises_on_every_capture_unsafe_operation(name):
    with (
        pytest.raises(HostSyncError, match="a captured graph cannot contain it"),
        HostSyncDetector(name),
    ):
        UNSAFE[name](X)


@pytest.mark.parametrize("name", list(SAFE))
def test_the_detector_lets_sync_free_operations_through(name):
    with HostSyncDetector(name) as detector:
        SAFE[name](X)
    assert detector.violations == []


def test_a_violation_names_the_ignition_line_that_made_it():
    from ignition.model.config import ModelConfig
    from ignition.model.layers.moe import MixtureOfExperts

    moe = MixtureOfExperts(ModelConfig.tiny())
    x = torch.randn(5, moe.gate.in_features)
    expected = r"at ignition/model/layers/moe\.py:\d+"
    with pytest.raises(HostSyncError, match=expected), HostSyncDetector("moe"), torch.no_grad():
        moe.routed_host_grouped(x)


def test_kernel_references_are_exempt_unless_asked_for():
    from ignition.kernels.paged_attention.reference import write_paged_kv

    cache = torch.zeros(2, 4, 1, 2)
    args = (
        torch.ones(3, 1, 2),
        torch.ones(3, 1, 2),
        cache,
        cache.clone(),
        torch.tensor([0, -1, 5]),
    )
    with HostSyncDetector("kv") as detector:
        write_paged_kv(*args)
    assert detector.violations == [] and detector.exempted
    referenced = HostSyncDetector("kv", check_kernel_references=True)
    with pytest.raises(HostSyncError, match=r"reference\.py"), referenced:
        write_paged_kv(*args)
