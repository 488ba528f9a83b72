from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

KERNELS = (
    "_packed_paged_attention_kernel",
    "_write_paged_kv_kernel",
    "_causal_conv1d_prefill_kernel",
    "_causal_conv1d_update_kernel",
    "_chunk_gated_delta_rule_kernel",
    "_recurrent_gated_delta_rule_kernel",
    "_allocate_speculative_prefixes_kernel",
    "_rejection_verify_kernel",
    "_block_scores_kernel",
    "_block_scores_tile_kernel",
    "_sparse_attention_kernel",
    "_combine_kernel",
    "_compress_kernel",
    "_write_pending_kernel",
    "_block_topk_kernel",
)


@pytest.mark.skipif(
    importlib.util.find_spec("triton.backends.nvidia") is None,
    reason="this triton build has no NVIDIA backend",
)
def test_every_triton_kernel_compiles_to_a_cubin_for_sm90():
    # The interpreter accepts code the compiler rejects; compile with the launchers' real
    # argument types in a process of its own (interpreted and compiled kernels cannot mix).
    env = {name: value for name, value in os.environ.items() if name != "TRITON_INTERPRET"}
    env.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
    script = Path(__file__).with_name("cuda_compile_check.py")
    result = subprocess.run(
        [sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=540
    )
    assert result.returncode == 0, result.stdout + result.stderr
    compiled = {
        line.split()[1] for line in result.stdout.splitlines() if line.startswith("compiled")
    }
    assert compiled == set(KERNELS)
