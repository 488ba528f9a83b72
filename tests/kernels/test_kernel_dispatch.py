from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

from ignition.kernels import current_backend, ops, use_backend
from ignition.kernels.dispatch import REGISTRY, KernelOp


def test_importing_kernels_and_calling_on_cpu_does_not_import_triton():
    code = (
        "import sys, torch\n"
        "from ignition.kernels import ops\n"
        "k = torch.zeros(2, 1, 4); c = torch.zeros(2, 2, 1, 4)\n"
        "ops.write_paged_kv(k, k, c, c.clone(), torch.tensor([0, -1], dtype=torch.int32))\n"
        "assert 'triton' not in sys.modules, 'triton was imported'\n"
    )
    subprocess.run(
        [sys.executable, "-c", code], check=True, env={**os.environ, "IGNITION_KERNELS": ""}
    )


def test_cpu_tensors_select_the_reference_by_default(monkeypatch):
    monkeypatch.delenv("IGNITION_KERNELS", raising=False)
    op = REGISTRY["write_paged_kv"]
    assert op.select((torch.zeros(1),), {}) == "reference"


def test_environment_variable_overrides_the_device_choice(monkeypatch):
    monkeypatch.setenv("IGNITION_KERNELS", "triton")
    assert REGISTRY["write_paged_kv"].select((torch.zeros(1),), {}) == "triton"


def test_use_backend_overrides_the_environment_and_restores_on_exit(monkeypatch):
    monkeypatch.setenv("IGNITION_KERNELS", "triton")
    with use_backend("reference"):
        assert current_backend() == "reference"
    assert current_backend() == "triton"


def test_unknown_backend_names_are_rejected(monkeypatch):
    with pytest.raises(ValueError, match="unknown kernel backend 'cuda'"), use_backend("cuda"):
        pass
    monkeypatch.setenv("IGNITION_KERNELS", "fast")
    with pytest.raises(ValueError, match="IGNITION_KERNELS"):
        current_backend()


def test_every_contract_op_is_registered_with_the_reference_docstring():
    names = {
        "packed_paged_attention",
        "write_paged_kv",
        "chunk_gated_delta_rule",
        "recurrent_gated_delta_rule",
        "causal_conv1d_prefill",
        "causal_conv1d_update",
        "allocate_speculative_prefixes",
        "rejection_verify",
    }
    assert names <= set(REGISTRY)
    for name in names:
        assert "Shapes:" in getattr(ops, name).__doc__


def test_forcing_triton_for_an_op_without_a_triton_kernel_names_the_op():
    with pytest.raises(NotImplementedError, match="'toy'"):
        KernelOp("toy", "paged_attention", has_triton=False).implementation("triton")


def test_forcing_triton_on_cpu_without_the_interpreter_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    k = torch.zeros(1, 1, 4)
    cache = torch.zeros(1, 2, 1, 4)
    with (
        pytest.raises(RuntimeError, match=r"'write_paged_kv'.*TRITON_INTERPRET=1"),
        use_backend("triton"),
    ):
        ops.write_paged_kv(k, k, cache, cache.clone(), torch.tensor([0], dtype=torch.int32))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_tensors_select_triton_by_default(monkeypatch):
    monkeypatch.delenv("IGNITION_KERNELS", raising=False)
    assert REGISTRY["write_paged_kv"].select((torch.zeros(1, device="cuda"),), {}) == "triton"
