"""Issue 31, per-slot state of Qwen3.8-Flash-Next: the PLE conv windows, the n-gram
context, the indexer's raw-key ring and the paged block keys go through reset, snapshot /
restore (the model's and the compiled state programs'), slot copies and the speculative
commit at the accepted length; rejected drafts leave them exactly as before the round."""

from __future__ import annotations

import torch

from ignition.compiler.state_ops import (
    SnapshotStore,
    StateOpInputs,
    restore_program,
    snapshot_program,
)
from ignition.model.packing import PackedCapacity, PackedInputs
from ignition.model.sampling import SamplingTensors
from ignition.model.speculative import RoundCapacity, RoundInputs, speculative_round
from tests.model.conftest import new_state
from tests.model.helpers import assert_states_equal, decode_rows, greedy_generate, prefill
from tests.model.hf_checkpoints import EOS_TOKEN_ID

PROMPT = [(37 * i + 11) % 4000 + 9 for i in range(21)]  # 21 = 5 blocks of 4 + a tail
PROMPT[6] = EOS_TOKEN_ID
NEW_KINDS = ("ple_window", "ngram_context", "index_raw", "index_rope")


def _decode(model, state, slot: int, tokens: list[int]) -> list[torch.Tensor]:
    return [decode_rows(model, state, [[t]], [slot], width=1).target.logits[0] for t in tokens]


def test_a_fresh_slot_holds_an_all_eos_context_and_zero_ple_and_index_state(qwen4_model):
    state = new_state(qwen4_model.config)
    prefill(qwen4_model, state, 0, PROMPT)
    state.reset_slot(0)
    assert bool((state.ngram_context[0] == EOS_TOKEN_ID).all())
    for name in ("ple_window", "index_raw"):
        assert not getattr(state, name)[:, 0].any()
    assert not state.index_rope[0].any()


def test_restore_then_continue_equals_uninterrupted_for_every_state_kind(qwen4_model):
    state = new_state(qwen4_model.config)
    prefill(qwen4_model, state, 0, PROMPT)
    snapshot = state.snapshot(0)
    saved = state.clone()
    uninterrupted = _decode(qwen4_model, state, 0, [5, 900, 77])
    after = state.clone()
    for name in NEW_KINDS:  # each kind moved on, so restoring it matters
        assert not torch.equal(getattr(after, name), getattr(saved, name)), name
    state.restore(0, snapshot)
    assert_states_equal(saved, state, atol=0)
    resumed = _decode(qwen4_model, state, 0, [5, 900, 77])
    for got, want in zip(resumed, uninterrupted, strict=True):
        torch.testing.assert_close(got, want, atol=0, rtol=0)
    assert_states_equal(after, state, atol=0)


def test_state_programs_move_a_slot_that_then_continues_identically(qwen4_model):
    state = new_state(qwen4_model.config)
    prefill(qwen4_model, state, 0, PROMPT)
    store = SnapshotStore.allocate(state, 1)
    one = torch.ones(1, dtype=torch.int32)
    snapshot_program(state, store)(StateOpInputs(slot=0 * one, row=0 * one))
    restore_program(state, store)(StateOpInputs(slot=one, row=0 * one))
    out = decode_rows(qwen4_model, state, [[5], [5]], [0, 1], width=1)
    torch.testing.assert_close(out.target.logits[0], out.target.logits[1], atol=0, rtol=0)


def test_copied_slot_decodes_like_its_source(qwen4_model):
    state = new_state(qwen4_model.config)
    prefill(qwen4_model, state, 0, PROMPT)
    state.copy_slot(0, 3)
    out = decode_rows(qwen4_model, state, [[5, 6], [5, 6]], [0, 3], width=2)
    torch.testing.assert_close(out.target.logits[:2], out.target.logits[2:4], atol=0, rtol=0)


@torch.no_grad()
def _verify(model, state, slot: int, drafts: list[int]):
    capacity = PackedCapacity.mixed(1, len(drafts), 0)
    return model.forward_packed(PackedInputs.build(capacity, [drafts], [slot]), capacity, state)


def test_rejected_drafts_leave_ple_ngram_and_index_state_untouched(qwen4_model):
    state = new_state(qwen4_model.config)
    prefill(qwen4_model, state, 0, PROMPT)
    before = state.clone()
    out = _verify(qwen4_model, state, 0, [5, 900, 77, 3000])
    qwen4_model.commit(out, torch.zeros(1, dtype=torch.long))
    assert_states_equal(before, state, atol=0)


def test_commit_at_the_accepted_length_equals_decoding_the_accepted_tokens(qwen4_model):
    verified, stepped = new_state(qwen4_model.config), new_state(qwen4_model.config)
    for state in (verified, stepped):
        prefill(qwen4_model, state, 0, PROMPT)
    out = _verify(qwen4_model, verified, 0, [5, 900, 77, 3000])
    qwen4_model.commit(out, torch.tensor([3]))
    _decode(qwen4_model, stepped, 0, [5, 900, 77])
    # the MTP's draft context is absorbed by a later call (the round's), not by commit
    for name in ("mtp_hidden", "mtp_index_raw", "mtp_k_cache", "mtp_v_cache", "mtp_index_keys"):
        getattr(verified, name).copy_(getattr(stepped, name))
    assert_states_equal(stepped, verified, atol=1e-5)


def _round(model, state, pending: int, drafts: list[int] | None, query_len: int, depth: int = 0):
    """One greedy speculative round of slot 0: ``drafts`` supplied, else ``depth`` MTP drafts."""
    slot = torch.tensor([0], dtype=torch.int32)
    lanes = dict(pending_tokens=torch.tensor([pending]), slot_ids=slot)
    depth = depth if drafts is None else len(drafts)
    extra = {} if drafts is None else {"supplied_drafts": torch.tensor([drafts])}
    return speculative_round(
        model,
        state,
        RoundInputs(**lanes, query_lens=torch.tensor([query_len], dtype=torch.int32), **extra),
        RoundCapacity(1, depth, query_len, query_len),
        SamplingTensors.greedy(1),
        greedy=True,
    )


def test_a_fully_rejected_round_leaves_every_state_kind_as_a_round_that_never_proposed(
    qwen4_model,
):
    base = new_state(qwen4_model.config)
    first = prefill(qwen4_model, base, 0, PROMPT)
    reference = greedy_generate(qwen4_model, new_state(qwen4_model.config), 0, PROMPT, 4)
    wrong = [(t + 1) % 4096 for t in reference[1:4]]
    proposed, plain = base.clone(), base.clone()
    rejected = _round(qwen4_model, proposed, first, wrong, 4)
    never = _round(qwen4_model, plain, first, None, 1)
    assert int(rejected.num_accepted[0]) == 0
    assert rejected.output_tokens[0, 0] == never.output_tokens[0, 0]
    assert_states_equal(proposed, plain, atol=1e-5)


def test_greedy_mtp_speculation_matches_greedy_decoding(qwen4_model):
    expected = greedy_generate(qwen4_model, new_state(qwen4_model.config), 0, PROMPT, 12)
    state = new_state(qwen4_model.config)
    tokens = [prefill(qwen4_model, state, 0, PROMPT)]
    while len(tokens) < 12:
        out = _round(qwen4_model, state, tokens[-1], None, 4, depth=3)
        tokens += [t for t in out.output_tokens[0].tolist() if t >= 0]
    assert tokens[:12] == expected
