"""QSA's block scoring and sparse attention: the Triton kernels equal their references on
packed rows of mixed frames (a single token, a prompt chunk ending on a block boundary, rows
just below and above the index budget, verification rows beside a prompt), with every output
filled with NaN first so an unwritten element fails."""

from __future__ import annotations

import pytest
import torch

from ignition.kernels import ops, use_backend
from ignition.kernels.qsa_block_scores import reference as scores_reference
from ignition.kernels.qsa_sparse_attention import reference as attention_reference
from tests.kernels.kernel_qsa_cases import make_qsa_case
from tests.kernels.kernel_tolerances import ATTENTION, INTERPRETER_DTYPES, nan_like

# keep 3 blocks of 4 = a budget of 12 visible tokens
ROWS = {
    "single-token": [(0, 1)],
    "block-boundary": [(4, 4)],
    "below-and-above-budget": [(10, 1), (12, 1), (13, 1)],
    "verification-beside-prompt": [(0, 9), (21, 4), (17, 3)],
}


@pytest.mark.parametrize("dtype", INTERPRETER_DTYPES, ids=str)
@pytest.mark.parametrize("rows", ROWS.values(), ids=ROWS.keys())
def test_block_scores_match_the_reference(rows, dtype, device):
    from ignition.kernels.qsa_block_scores.triton import launch_qsa_block_scores

    case = make_qsa_case(rows, dtype=dtype, device=device)
    args = (case.index_q, case.block_keys, case.page_table, case.token_row, case.num_complete)
    expected = scores_reference.qsa_block_scores(*args)
    out = nan_like(expected)
    launch_qsa_block_scores(*args, out, use_tiles=False)
    torch.testing.assert_close(out, expected, **ATTENTION[torch.float32])


@pytest.mark.parametrize("dtype", INTERPRETER_DTYPES, ids=str)
def test_the_prefill_tiles_score_as_the_reference(dtype, device):
    """Query tiles of one row share their key reads; tiles that straddle rows fall back."""
    from ignition.kernels.qsa_block_scores.triton import launch_qsa_block_scores

    case = make_qsa_case([(30, 20), (12, 1), (40, 1)], dtype=dtype, device=device)
    args = (case.index_q, case.block_keys, case.page_table, case.token_row, case.num_complete)
    expected = scores_reference.qsa_block_scores(*args)
    out = nan_like(expected)
    launch_qsa_block_scores(*args, out, use_tiles=True)
    torch.testing.assert_close(out, expected, **ATTENTION[torch.float32])


def test_block_scores_of_a_context_spanning_several_tiles_match_the_reference(device):
    from ignition.kernels.qsa_block_scores.triton import BLOCK_B, launch_qsa_block_scores

    case = make_qsa_case([(301, 1), (2, 3)], max_pages=40, device=device)  # 75 blocks
    args = (case.index_q, case.block_keys, case.page_table, case.token_row, case.num_complete)
    expected = scores_reference.qsa_block_scores(*args)
    assert int(case.num_complete.max()) > BLOCK_B
    out = nan_like(expected)
    launch_qsa_block_scores(*args, out)
    torch.testing.assert_close(out, expected, **ATTENTION[torch.float32])


def test_block_scores_are_minus_infinity_past_the_visible_blocks():
    case = make_qsa_case([(0, 9)])
    args = (case.index_q, case.block_keys, case.page_table, case.token_row, case.num_complete)
    scores = scores_reference.qsa_block_scores(*args)
    block = torch.arange(scores.shape[1])
    is_hidden = block[None, :] >= case.num_complete[:, None]
    assert torch.isneginf(scores[is_hidden]).all() and torch.isfinite(scores[~is_hidden]).all()


def test_a_block_score_is_the_sum_over_heads_of_relu_dot_over_root_d():
    case = make_qsa_case([(6, 1)])  # position 6: one complete block
    args = (case.index_q, case.block_keys, case.page_table, case.token_row, case.num_complete)
    scores = scores_reference.qsa_block_scores(*args)
    key = case.block_keys[case.page_table[0, 0], 0]
    expected = (case.index_q[0] @ key).relu().sum() / 16**0.5
    torch.testing.assert_close(scores[0, 0], expected)


@pytest.mark.parametrize("dtype", INTERPRETER_DTYPES, ids=str)
@pytest.mark.parametrize("rows", ROWS.values(), ids=ROWS.keys())
def test_sparse_attention_matches_the_reference(rows, dtype, device):
    from ignition.kernels.qsa_sparse_attention.triton import launch_qsa_sparse_attention

    case = make_qsa_case(rows, dtype=dtype, device=device)
    args = (case.q, case.k_cache, case.v_cache, case.page_table, case.token_row, case.selected)
    out = nan_like(case.q)
    launch_qsa_sparse_attention(*args, 0.25, out)
    expected = attention_reference.qsa_sparse_attention(*args, 0.25)
    torch.testing.assert_close(out, expected, **ATTENTION[dtype])


@pytest.mark.parametrize("num_splits", [1, 2, 3])
def test_the_decode_split_and_the_prefill_path_agree(num_splits, device):
    from ignition.kernels.qsa_sparse_attention.triton import launch_qsa_sparse_attention

    case = make_qsa_case([(27, 1), (5, 2)], device=device, keep=6)  # 27 selected positions
    args = (case.q, case.k_cache, case.v_cache, case.page_table, case.token_row, case.selected)
    out = nan_like(case.q)
    launch_qsa_sparse_attention(*args, 0.3, out, num_splits=num_splits)
    expected = attention_reference.qsa_sparse_attention(*args, 0.3)
    torch.testing.assert_close(out, expected, **ATTENTION[torch.float32])


def test_a_query_that_selects_nothing_attends_to_nothing(device):
    case = make_qsa_case([(3, 2)], device=device)
    selected = torch.full_like(case.selected, -1)
    args = (case.q, case.k_cache, case.v_cache, case.page_table, case.token_row, selected)
    with use_backend("triton"):
        out = ops.qsa_sparse_attention(*args, 0.25)
    assert torch.equal(out, torch.zeros_like(out))


def test_sparse_attention_over_every_visible_position_is_dense_causal_attention():
    from ignition.kernels.paged_attention.reference import packed_paged_attention

    case = make_qsa_case([(5, 3)])
    selected = torch.stack([torch.arange(12).where(torch.arange(12) <= p, -1) for p in [5, 6, 7]])
    args = (case.q, case.k_cache, case.v_cache, case.page_table, case.token_row)
    ours = attention_reference.qsa_sparse_attention(*args, selected, 0.25)
    cu = torch.tensor([0, 3], dtype=torch.int32)
    dense = packed_paged_attention(
        case.q, case.k_cache, case.v_cache, case.page_table, cu, torch.tensor([8]), 0.25
    )
    torch.testing.assert_close(ours, dense, **ATTENTION[torch.float32])


def test_the_qsa_ops_on_triton_make_no_host_sync(device):
    """Scoring, selection, sparse attention, the block-key write and the pending keys' write,
    as a captured decode or verification program issues them (the CPU references are exempt;
    these are not)."""
    from ignition.compiler.host_sync import HostSyncDetector
    from tests.kernels.test_qsa_block_compress import compress_case

    case = make_qsa_case([(27, 1), (5, 3)], device=device)
    compress_args = compress_case(torch.float32, device)
    block_keys = torch.zeros(4, 2, 24, device=device)
    with use_backend("triton"), HostSyncDetector("qsa ops", check_kernel_references=True):
        scores = ops.qsa_block_scores(
            case.index_q, case.block_keys, case.page_table, case.token_row, case.num_complete
        )
        ops.block_topk(scores, case.num_complete, 3)
        ops.qsa_sparse_attention(
            case.q, case.k_cache, case.v_cache, case.page_table, case.token_row, case.selected, 0.25
        )
        ops.compress_block_keys(*compress_args, block_keys)
        rows = torch.arange(6, device=device) % 4
        ops.write_pending_keys(compress_args[0], compress_args[1], rows, rows)
