"""A gated grammar's reasoning closes in time for its constrained reply (issue 38, 3.2).

With ``--reasoning-parser`` the grammar of a forced tool call or a schema starts after the
reasoning block's end tag (the gate). A model that never writes the tag (the embedded tiny
model) used to reason until ``max_tokens`` and return no call and no JSON; now the request's
budget sets a deadline (``RequestGrammar.within``: REASONING_SHARE of ``max_tokens``) from
which the mask allows only the gate's next token, and the end of sequence is never allowed
while gated (it would end the reply before its constrained part).
"""

from __future__ import annotations

import json
from dataclasses import replace

import torch

from ignition.model.grammar_mask import apply_token_mask, mask_words
from ignition.runtime.grammar import REASONING_SHARE, GrammarSpec, GrammarState
from tests.runtime.structured import MODEL_VOCAB, compiler, tokenizer
from tests.runtime.tiny import EOS

CHOICE = GrammarSpec("choice", json.dumps(["ok"]), "structured_outputs.choice")
FREE = tokenizer().encode("x").ids[0]  # a reasoning token that is no part of a gate


def allowed(state: GrammarState) -> set[int] | None:
    """The ids the next position allows; None: all but the end of sequence."""
    table = torch.zeros((1, mask_words(MODEL_VOCAB)), dtype=torch.int32)
    state.fill(table, 0)
    logits = apply_token_mask(torch.zeros(1, MODEL_VOCAB), table, torch.ones(1, dtype=bool))
    ids = set(torch.isfinite(logits[0]).nonzero().flatten().tolist())
    return None if ids == set(range(MODEL_VOCAB)) - {EOS} else ids


def gated(gate: tuple[int, ...], max_tokens: int | None) -> GrammarState:
    grammar = replace(compiler().compile(CHOICE), gate=gate)
    return GrammarState(grammar if max_tokens is None else grammar.within(max_tokens))


def test_the_gate_is_forced_once_the_reasoning_has_spent_its_share_of_max_tokens():
    gate = (FREE + 1,)
    state = gated(gate, max_tokens=10)
    assert state.grammar.gate_deadline == int(10 * REASONING_SHARE) == 5
    for _ in range(4):
        assert allowed(state) is None  # free reasoning (no end of sequence)
        assert state.accept(FREE)
    assert allowed(state) == {gate[0]}
    assert state.forced_drafts() == gate
    assert state.accept(gate[0]) and not state.is_gated
    after = allowed(state)
    assert after and all("ok".startswith(tokenizer().decode([i])) for i in after)


def test_a_gate_of_several_tokens_is_forced_from_where_the_output_left_it():
    gate = (FREE + 1, FREE + 2, FREE + 3)
    state = gated(gate, max_tokens=8)  # deadline 4: forcing starts after 1 token
    assert allowed(state) is None
    assert state.accept(gate[0])  # the model began the tag by itself
    assert allowed(state) == {gate[1]}
    assert state.forced_drafts() == gate[1:]
    for token in gate[1:]:
        assert state.accept(token)
    assert not state.is_gated


def test_a_replayed_history_counts_toward_the_deadline():
    gate = (FREE + 1,)
    state = GrammarState(gated(gate, 6).grammar, history=[FREE, FREE])
    assert allowed(state) == {gate[0]}


def test_walking_drafts_leaves_the_count_as_it_was():
    gate = (FREE + 1,)
    state = gated(gate, max_tokens=6)  # deadline 3: forced after 2 tokens
    masks = torch.zeros((3, mask_words(MODEL_VOCAB)), dtype=torch.int32)
    assert state.fill_positions(masks, [FREE, FREE]) == 2
    assert allowed(state) is None
    assert state.accept(FREE)


def test_without_a_budget_the_gate_is_never_forced():
    state = gated((FREE + 1,), max_tokens=None)
    for _ in range(50):
        assert allowed(state) is None
        assert state.accept(FREE)
    assert state.forced_drafts() == ()
