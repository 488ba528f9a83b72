"""Issue 23 with an FP8 release's layout: each PLE table's ``shard_N`` rows in F8_E4M3 beside
one ``ngram_embedding.weight_scale`` are served in place off the device and expanded as they
are delivered, exactly as the loader expands them, so greedy output equals the device's."""

from __future__ import annotations

import pytest
import torch

from ignition.runtime.ple.model import checkpoint_table
from tests.runtime.test_ple_residency_greedy import catalog, engine_at, waves  # noqa: F401
from tests.runtime.test_retention_differential import _run

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("reference_kernels")]
pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    from ignition.model.weights import load_checkpoint
    from tests.model.fp8_checkpoints import quantize_to_fp8
    from tests.model.hf_checkpoints import rewrite_tensors, write_qwen4_exp
    from tests.model.test_qwen4_exp_fp8 import _quantize_tables

    path = tmp_path_factory.mktemp("qwen4-fp8-ple")
    write_qwen4_exp(path, seed=5, mtp=True)
    quantize_to_fp8(path, (16, 16))
    rewrite_tensors(path, _quantize_tables)
    return path, load_checkpoint(path).model


def test_the_fp8_table_is_mapped_as_stored_with_one_scale_per_layer(checkpoint):
    layout, scales = checkpoint_table(*checkpoint)
    assert layout.dtype == torch.float8_e4m3fn
    assert len(scales) == 2 and all(s is not None and s.numel() == 1 for s in scales)


def test_an_fp8_table_off_the_device_gives_the_device_greedy_output(checkpoint, catalog):  # noqa: F811
    runs = {}
    for residency in ("device", "disk"):
        engine, ple = engine_at(checkpoint, catalog, residency, "adaptive")
        runs[residency] = _run(engine, waves())
        if ple.mailbox is not None:
            ple.mailbox.close()
    assert runs["disk"] == runs["device"]
