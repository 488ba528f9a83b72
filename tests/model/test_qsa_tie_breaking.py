"""Serving keeps the QSA blocks transformers keeps when block scores tie at the top-k cut.

The embedded default's trained indexer scores many blocks exactly 0 (relu of heads that are
all negative), so past its index budget the cut falls among tied blocks. Breaking those ties
by a padded top-k (the rule before ``ops.block_topk``) put logits 0.024 away from transformers
on this prompt; the paged path (chunked prefill across blocks, then decode) now matches."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import ignition
from ignition.model.state import ModelState, contiguous_pages
from ignition.model.weights import load_model
from tests.model.helpers import decode_rows
from tests.model.test_qwen4_exp_parity import max_diff, prompt_logits

transformers = pytest.importorskip("transformers")

ASSET = Path(ignition.__file__).parent / "assets" / "qwen38-tiny"
ATOL = 1e-4
PAGE_SIZE = 16
MAX_PAGES = 8  # 128 positions: the prompt and its continuation


@pytest.fixture(scope="module")
def pair():
    from tokenizers import Tokenizer

    from tests.scripts.test_tiny_checkpoint import LONG_PROMPT

    ids = Tokenizer.from_file(str(ASSET / "tokenizer.json")).encode(LONG_PROMPT).ids
    reference = transformers.Qwen4ExpForCausalLM.from_pretrained(str(ASSET)).eval()
    with torch.no_grad():
        logits = reference(input_ids=torch.tensor([ids]), use_cache=False).logits[0].float()
    return load_model(ASSET), ids, logits


def paged_state(model) -> ModelState:
    state = ModelState.allocate(
        model.config,
        num_slots=1,
        num_pages=MAX_PAGES,
        page_size=PAGE_SIZE,
        max_pages_per_slot=MAX_PAGES,
    )
    contiguous_pages(state)
    return state


def test_the_prompt_runs_well_past_the_index_budget(pair):
    model, ids, _ = pair
    assert len(ids) > model.config.qsa_indexer.budget + 16


def test_chunked_prefill_then_decode_past_the_budget_matches_transformers(pair):
    model, ids, expected = pair
    split = len(ids) - 6
    state = paged_state(model)
    ours = prompt_logits(model, state, 0, ids[:split], chunk=13)
    assert max_diff(ours, expected[:split]) < ATOL
    for position in range(split, len(ids)):
        out = decode_rows(model, state, [[ids[position]]], [0], width=1)
        assert max_diff(out.target.logits[0], expected[position]) < ATOL, position
