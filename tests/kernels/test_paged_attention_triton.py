from __future__ import annotations

import pytest
import torch

from ignition.kernels import ops, use_backend
from ignition.kernels.paged_attention import reference
from tests.kernels.kernel_paged_cases import make_paged_case
from tests.kernels.kernel_tolerances import ATTENTION, EXACT, INTERPRETER_DTYPES, nan_like

pytestmark = pytest.mark.slow

ROWS = {
    "single-token": [(0, 1)],
    "prompt-63": [(0, 63)],
    "prompt-beside-three-decoders": [(9, 37), (30, 1), (5, 3), (17, 2)],
    "zero-length-rows": [(4, 0), (2, 5), (0, 0), (11, 1)],
}


def run_both(case, out, scale=0.25):
    from ignition.kernels.paged_attention import triton

    args = (case.q, case.k_cache, case.v_cache, case.page_table)
    triton.launch_packed_paged_attention(*args, case.cu_query_lens, case.context_lens, scale, out)
    return reference.packed_paged_attention(*args, case.cu_query_lens, case.context_lens, scale)


@pytest.mark.parametrize("dtype", INTERPRETER_DTYPES, ids=str)
@pytest.mark.parametrize("rows", ROWS.values(), ids=ROWS.keys())
def test_packed_paged_attention_matches_reference(rows, dtype, device):
    capacity = sum(n for _, n in rows) + 7  # unused packed capacity must come back as zeros
    case = make_paged_case(
        rows, token_capacity=capacity, dtype=dtype, device=device, max_pages=16, page_size=4
    )
    out = nan_like(case.q)
    expected = run_both(case, out)
    torch.testing.assert_close(out, expected, **ATTENTION[dtype])


def test_packed_paged_attention_with_one_kv_head_per_query_head(device):
    case = make_paged_case([(3, 20), (6, 2)], num_heads=2, num_kv_heads=2, device=device)
    out = nan_like(case.q)
    expected = run_both(case, out)
    torch.testing.assert_close(out, expected, **ATTENTION[torch.float32])


def test_dispatcher_runs_the_triton_kernel_when_forced(device):
    case = make_paged_case([(2, 3), (0, 1)], device=device)
    args = (case.q, case.k_cache, case.v_cache, case.page_table)
    with use_backend("triton"):
        out = ops.packed_paged_attention(*args, case.cu_query_lens, case.context_lens, 0.3)
    expected = reference.packed_paged_attention(*args, case.cu_query_lens, case.context_lens, 0.3)
    torch.testing.assert_close(out, expected, **ATTENTION[torch.float32])


@pytest.mark.parametrize("dtype", INTERPRETER_DTYPES, ids=str)
def test_write_paged_kv_matches_reference(dtype, device):
    gen = torch.Generator().manual_seed(3)
    k = torch.randn(7, 2, 16, generator=gen).to(dtype).to(device)
    v = torch.randn(7, 2, 16, generator=gen).to(dtype).to(device)
    slots = torch.tensor([5, -1, 0, 11, -1, 3, 8], dtype=torch.int32, device=device)
    k_cache = nan_like(k, 3, 4, 2, 16)
    v_cache = nan_like(v, 3, 4, 2, 16)
    expected_k, expected_v = k_cache.clone(), v_cache.clone()
    reference.write_paged_kv(k, v, expected_k, expected_v, slots)
    with use_backend("triton"):
        ops.write_paged_kv(k, v, k_cache, v_cache, slots)
    torch.testing.assert_close(k_cache, expected_k, equal_nan=True, **EXACT)
    torch.testing.assert_close(v_cache, expected_v, equal_nan=True, **EXACT)
