"""QSA block scoring reference: a query's scores do not depend on the frame around it. A
prompt chunk's queries score against their row's keys read once (one product per run of a
row), a decode row's query gathers its own; each score must have the bits it has when the
query is scored alone, so that outputs stay bitwise equal across frame compositions
(speculation modes, prompts packed in lanes or not)."""

from __future__ import annotations

import pytest
import torch

from ignition.kernels.qsa_block_scores import reference
from tests.kernels.kernel_qsa_cases import QsaCase, make_qsa_case

# (cached_len, query_len): prompt chunks (long runs) beside decode and verification rows
FRAMES = {
    "four-prompt-lanes": [(0, 16), (0, 16), (8, 16), (0, 13)],
    "prompt-beside-decoders": [(20, 1), (0, 27), (33, 1), (9, 3)],
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float8_e4m3fn], ids=str)
@pytest.mark.parametrize("rows", FRAMES.values(), ids=FRAMES.keys())
def test_each_query_scores_the_same_bits_as_when_scored_alone(rows, dtype):
    case = make_qsa_case(rows, max_pages=8, index_heads=4, index_dim=32)
    _assert_scored_alone(case, dtype, rows)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_the_benchmark_shapes_score_the_same_bits_as_alone(dtype):
    """vs_transformers.py's qwen4_exp: 8 index heads of 64, 1,040 blocks per row."""
    rows = [(0, 24), (40, 24), (1000, 9), (3000, 1)]
    case = make_qsa_case(
        rows, page_size=64, max_pages=65, index_heads=8, index_dim=64, head_dim=8
    )
    _assert_scored_alone(case, dtype, rows)


def _assert_scored_alone(case: QsaCase, dtype: torch.dtype, rows: list[tuple[int, int]]) -> None:
    q = case.index_q if dtype is torch.float8_e4m3fn else case.index_q.to(dtype)
    keys = case.block_keys.to(dtype)
    table, token_row, complete = case.page_table, case.token_row, case.num_complete
    scores = reference.qsa_block_scores(q, keys, table, token_row, complete)
    assert any(n >= reference.MIN_SHARED_RUN for _, n in rows)  # the shared path runs
    for t in range(q.shape[0]):
        one = slice(t, t + 1)
        alone = reference.qsa_block_scores(q[one], keys, table, token_row[one], complete[one])
        assert torch.equal(scores[t], alone[0]), f"token {t}"


def test_a_row_split_into_runs_scores_as_one_run():
    """The same row in two runs (a row's tokens need not be contiguous) and in chunks smaller
    than the run (``MAX_CHUNK_ELEMENTS``) gives the same scores."""
    case = make_qsa_case([(0, 30)], index_heads=4, index_dim=32)
    args = (case.index_q, case.block_keys, case.page_table)
    whole = reference.qsa_block_scores(*args, case.token_row, case.num_complete)
    order = torch.cat([torch.arange(15, 30), torch.arange(0, 15)])
    shuffled = reference.qsa_block_scores(
        case.index_q[order], case.block_keys, case.page_table, case.token_row[order],
        case.num_complete[order],
    )  # fmt: skip
    assert torch.equal(shuffled, whole[order])
    small = reference.MAX_CHUNK_ELEMENTS
    try:
        reference.MAX_CHUNK_ELEMENTS = 7 * case.page_table.shape[1] * 2 * (32 + 4)
        chunked = reference.qsa_block_scores(*args, case.token_row, case.num_complete)
    finally:
        reference.MAX_CHUNK_ELEMENTS = small
    assert torch.equal(chunked, whole)


def test_the_rows_runs():
    rows = torch.tensor([2, 2, 2, 0, 1, 1, 2])
    assert reference.row_runs(rows) == [(0, 3, 2), (3, 4, 0), (4, 6, 1), (6, 7, 2)]
    assert reference.row_runs(rows[:0]) == []
