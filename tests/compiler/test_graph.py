"""Static-buffer programs: the same host code drives eager CPU runs and CUDA-graph replays."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch

from ignition.compiler.graph import GraphCapturer, copy_into, timed_run, tree_nbytes


@dataclass
class Inputs:
    x: torch.Tensor  # [n]
    scale: torch.Tensor  # [1]


@dataclass
class Outputs:
    y: torch.Tensor  # [n]
    total: torch.Tensor  # []


def program(inputs: Inputs) -> Outputs:
    y = inputs.x * inputs.scale
    return Outputs(y=y, total=y.sum())


def prepare(device: str):
    inputs = Inputs(x=torch.zeros(8, device=device), scale=torch.ones(1, device=device))
    return GraphCapturer(device).prepare("scale", program, inputs)


def test_cpu_program_writes_results_into_its_static_outputs():
    prepared = prepare("cpu")
    assert not prepared.is_captured
    first = prepared.run()
    prepared.inputs.x.copy_(torch.arange(8.0))
    prepared.inputs.scale.fill_(2.0)
    result = prepared.run()
    assert result is first is prepared.outputs
    assert torch.equal(result.y, torch.arange(8.0) * 2)
    assert result.total.item() == 56.0


def test_static_outputs_change_only_when_the_program_runs():
    prepared = prepare("cpu")
    before = prepared.run().y.clone()
    prepared.inputs.x.fill_(3.0)
    assert torch.equal(prepared.outputs.y, before)


def test_cpu_program_flushes_denormals_only_while_it_runs():
    """An eager CPU program computes with denormals flushed to zero (the gated delta
    rule's fast decays are tens of times slower as denormals); code outside it keeps
    the default, gradual underflow."""
    if not torch.set_flush_denormal(False):
        pytest.skip("this CPU has no flush-to-zero mode")
    prepared = prepare("cpu")
    prepared.run()
    prepared.inputs.x.fill_(1e-20)
    prepared.inputs.scale.fill_(1e-20)  # 1e-40: a denormal in fp32
    assert torch.equal(prepared.run().y, torch.zeros(8))
    assert prepared.inputs.x[0] * prepared.inputs.scale[0] > 0


def test_copy_into_rejects_a_shape_change():
    with pytest.raises(ValueError, match=r"static output shape \(8,\) received \(4,\)"):
        copy_into(torch.zeros(8), torch.zeros(4))


def test_timed_run_reports_a_positive_interval():
    prepared = prepare("cpu")
    _, interval_ns = timed_run(prepared)
    assert interval_ns > 0


def test_tree_nbytes_counts_every_leaf():
    assert tree_nbytes(Inputs(x=torch.zeros(8), scale=torch.zeros(1))) == 36


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_program_is_captured_and_replays_new_inputs():
    prepared = prepare("cuda")
    assert prepared.is_captured
    prepared.inputs.x.copy_(torch.arange(8.0, device="cuda"))
    prepared.inputs.scale.fill_(3.0)
    prepared.run()
    torch.cuda.synchronize()
    assert torch.equal(prepared.outputs.y.cpu(), torch.arange(8.0) * 3)
