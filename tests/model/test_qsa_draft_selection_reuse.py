"""The MTP's draft steps may reuse the round's first draft step's QSA selection: later steps
attend over that step's blocks and tail plus the positions drafted since, without scoring the
block keys again; within the index budget (every position selected) nothing changes."""

from __future__ import annotations

import torch

from ignition.kernels import ops
from ignition.model.layers.qsa import DraftSelections
from tests.model.conftest import new_state
from tests.model.helpers import prefill

DRAFTS = [5, 900, 77]


def draft(model, prompt, selections):
    state = new_state(model.config)
    prefill(model, state, 0, prompt)
    slots = torch.tensor([0], dtype=torch.int32)
    hidden = state.mtp_hidden[:1]
    outputs = []
    for k, token in enumerate(DRAFTS):
        hidden = model.draft_step(torch.tensor([token]), hidden, slots, k, state, None, selections)
        outputs.append(hidden)
    return outputs


@torch.no_grad()
def test_within_the_budget_reusing_the_first_selection_changes_no_draft(qwen4_model):
    prompt = [(37 * i + 11) % 4000 + 9 for i in range(4)]  # drafts at 4..6: budget 8
    fresh = draft(qwen4_model, prompt, None)
    reused = draft(qwen4_model, prompt, DraftSelections())
    for a, b in zip(fresh, reused, strict=True):
        torch.testing.assert_close(b, a, atol=1e-6, rtol=0)


@torch.no_grad()
def test_later_steps_attend_the_first_selection_plus_the_positions_since(qwen4_model, monkeypatch):
    prompt = [(37 * i + 11) % 4000 + 9 for i in range(21)]  # above the budget: blocks chosen
    seen = []
    original = ops.qsa_sparse_attention

    def spy(q, k_cache, v_cache, page_table, token_row, selected, scale):
        seen.append(selected.clone())
        return original(q, k_cache, v_cache, page_table, token_row, selected, scale)

    selections = DraftSelections()
    state = new_state(qwen4_model.config)
    prefill(qwen4_model, state, 0, prompt)
    monkeypatch.setattr(ops, "qsa_sparse_attention", spy)
    slots = torch.tensor([0], dtype=torch.int32)
    hidden = state.mtp_hidden[:1]
    for k, token in enumerate(DRAFTS):
        hidden = qwen4_model.draft_step(
            torch.tensor([token]), hidden, slots, k, state, None, selections
        )
    first = seen[0]
    assert len(selections.per_layer) == 1 and torch.equal(selections.per_layer[0], first)
    for k, selected in enumerate(seen[1:], start=1):
        width = first.shape[1]
        assert torch.equal(selected[:, :width], first)
        assert selected[0, width:].tolist() == list(range(21 + 1, 21 + k + 1))
