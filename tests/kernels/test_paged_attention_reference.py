from __future__ import annotations

import pytest
import torch

from ignition.kernels.paged_attention.reference import packed_paged_attention, write_paged_kv
from tests.kernels.kernel_paged_cases import make_paged_case

ATTENTION_TOLERANCE = {"atol": 1e-5, "rtol": 1e-5}


def dense_row_attention(q, keys, values, cached_len, scale):
    """Naive per-query softmax attention of one row: [n, H, Dh] over [ctx, Hkv, Dh]."""
    group = q.shape[1] // keys.shape[1]
    out = torch.empty_like(q)
    for i in range(q.shape[0]):
        visible = cached_len + i + 1
        for h in range(q.shape[1]):
            k = keys[:visible, h // group]
            weights = torch.softmax((k @ q[i, h]) * scale, dim=0)
            out[i, h] = weights @ values[:visible, h // group]
    return out


@pytest.mark.parametrize(
    "rows",
    [
        [(0, 1)],
        [(0, 9)],
        [(5, 23), (7, 1), (0, 2), (12, 3)],
        [(3, 0), (2, 4), (0, 0), (9, 1)],
    ],
    ids=["single-token", "prompt", "prompt-beside-three-decoders", "zero-length-rows"],
)
def test_matches_dense_causal_attention_per_row(rows):
    case = make_paged_case(rows, token_capacity=sum(n for _, n in rows) + 3)
    scale = 16**-0.5
    out = packed_paged_attention(
        case.q, case.k_cache, case.v_cache, case.page_table,
        case.cu_query_lens, case.context_lens, scale,
    )  # fmt: skip
    starts = case.cu_query_lens.tolist()
    for r, (cached, query) in enumerate(rows):
        span = slice(starts[r], starts[r] + query)
        expected = dense_row_attention(case.q[span], case.keys[r], case.values[r], cached, scale)
        torch.testing.assert_close(out[span], expected, **ATTENTION_TOLERANCE)


def test_unused_packed_capacity_is_written_as_zeros():
    case = make_paged_case([(2, 3), (4, 1)], token_capacity=9)
    out = packed_paged_attention(
        case.q, case.k_cache, case.v_cache, case.page_table,
        case.cu_query_lens, case.context_lens, 0.25,
    )  # fmt: skip
    assert torch.equal(out[4:], torch.zeros_like(out[4:]))


def test_a_row_does_not_see_keys_past_its_context():
    case = make_paged_case([(3, 2)], page_size=4)
    first = packed_paged_attention(
        case.q, case.k_cache, case.v_cache, case.page_table,
        case.cu_query_lens, case.context_lens, 0.25,
    )  # fmt: skip
    k_cache, v_cache = case.k_cache.clone(), case.v_cache.clone()
    page = case.page_table[0, 1]  # slots 5..7 of the row are past its context of 5
    k_cache[page, 1:] = 1e4
    v_cache[page, 1:] = 1e4
    second = packed_paged_attention(
        case.q, k_cache, v_cache, case.page_table, case.cu_query_lens, case.context_lens, 0.25
    )
    torch.testing.assert_close(first, second, rtol=0, atol=0)


def test_write_paged_kv_scatters_to_slots_and_skips_padding():
    k_cache = torch.zeros(3, 4, 2, 8)
    v_cache = torch.zeros(3, 4, 2, 8)
    k = torch.randn(4, 2, 8)
    v = torch.randn(4, 2, 8)
    slots = torch.tensor([9, -1, 2, 4], dtype=torch.int32)
    write_paged_kv(k, v, k_cache, v_cache, slots)
    for token, slot in enumerate(slots.tolist()):
        if slot >= 0:
            assert torch.equal(k_cache[slot // 4, slot % 4], k[token])
            assert torch.equal(v_cache[slot // 4, slot % 4], v[token])
    written = {9, 2, 4}
    untouched = [s for s in range(12) if s not in written]
    assert torch.count_nonzero(k_cache.view(12, -1)[untouched]) == 0
    assert torch.count_nonzero(v_cache.view(12, -1)[untouched]) == 0
