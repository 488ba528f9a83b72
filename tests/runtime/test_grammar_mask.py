"""The grammar mask as a sampling input: its bit layout, the rows it touches, and the
speculative round's rules: a constrained row verifies only supplied drafts, each
verification position under its own mask, and none without them."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace

import pytest
import torch
import xgrammar as xgr

from ignition.model.grammar_mask import apply_token_mask, mask_words
from ignition.model.sampling import SamplingTensors
from ignition.model.speculative import RoundCapacity, RoundInputs, speculative_round
from ignition.runtime.grammar import (
    GrammarError,
    GrammarSpec,
    GrammarState,
    LazyGrammarCompiler,
)
from tests.model.conftest import new_state
from tests.model.helpers import greedy_generate, prefill
from tests.runtime.structured import MODEL_VOCAB, SCHEMA, compiler, tokenizer
from tests.runtime.tiny import EOS

pytestmark = pytest.mark.usefixtures("reference_kernels")
PROMPT = [3, 14, 15, 92, 65, 35, 89, 79]


def random_bitmask(rows: int, vocab: int, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    bits = torch.randint(-(2**31), 2**31 - 1, (rows, mask_words(vocab)), generator=g)
    return bits.to(torch.int32)


def test_the_mask_unpacks_as_xgrammar_applies_it():
    logits = torch.randn(3, 200)
    bitmask = random_bitmask(3, 200)
    expected = logits.clone()
    xgr.apply_token_bitmask_inplace(expected, bitmask)
    got = apply_token_mask(logits, bitmask, torch.ones(3, dtype=torch.bool))
    assert torch.equal(got, expected)


def test_only_masked_rows_are_masked():
    logits = torch.randn(2, 100)
    bitmask = torch.zeros(2, mask_words(100), dtype=torch.int32)  # nothing allowed
    got = apply_token_mask(logits, bitmask, torch.tensor([False, True]))
    assert torch.equal(got[0], logits[0])
    assert torch.isneginf(got[1]).all()


def test_a_compiled_grammar_never_allows_a_padding_id_past_the_tokenizer():
    state = GrammarState(compiler().compile(GrammarSpec("json_object", "", "response_format")))
    table = torch.full((1, mask_words(MODEL_VOCAB)), -1, dtype=torch.int32)
    state.fill(table, 0)
    allowed = apply_token_mask(torch.zeros(1, MODEL_VOCAB), table, torch.ones(1, dtype=bool))
    ids = torch.isfinite(allowed[0]).nonzero().flatten().tolist()
    assert ids and max(ids) < tokenizer().get_vocab_size()
    assert EOS not in ids  # nothing is complete yet


def test_once_the_grammar_ends_only_eos_is_allowed():
    spec = GrammarSpec("choice", json.dumps(["ok"]), "structured_outputs.choice")
    state = GrammarState(compiler().compile(spec))
    for token in tokenizer().encode("ok").ids:
        assert state.accept(token)
    assert state.accept(EOS) and state.is_terminated
    table = torch.full((1, mask_words(MODEL_VOCAB)), -1, dtype=torch.int32)
    state.fill(table, 0)
    allowed = apply_token_mask(torch.zeros(1, MODEL_VOCAB), table, torch.ones(1, dtype=bool))
    assert torch.isfinite(allowed[0]).nonzero().flatten().tolist() == [EOS]


@pytest.mark.parametrize(
    ("spec", "named"),
    [
        (GrammarSpec("json_schema", '{"type": "nope"}', "response_format.json_schema"), "nope"),
        (GrammarSpec("regex", "a(b", "structured_outputs.regex"), "parenthesis"),
        (GrammarSpec("grammar", "root ::= undefined_rule", "guided_grammar"), "undefined_rule"),
    ],
)
def test_a_grammar_that_does_not_compile_is_an_error_naming_its_field(spec, named):
    with pytest.raises(GrammarError) as caught:
        compiler().compile(spec)
    assert caught.value.param == spec.field
    assert str(caught.value).startswith(f"{spec.field}: invalid {spec.kind}")
    assert named in str(caught.value)


def _round(model, state, first, drafts, params):
    inputs = RoundInputs(
        pending_tokens=torch.tensor([first]),
        slot_ids=torch.tensor([0], dtype=torch.int32),
        query_lens=torch.tensor([4], dtype=torch.int32),
        supplied_drafts=torch.tensor([drafts]),
    )
    return speculative_round(model, state, inputs, RoundCapacity(1, 3, 4, 4), params, True)


def test_a_masked_row_verifies_no_drafts_and_samples_under_its_mask(model):
    """Drafts equal to the greedy continuation are all accepted unmasked; a masked row
    (even one whose mask allows every token) emits only its first position's token."""
    config = model.config
    base = new_state(config)
    first = prefill(model, base, 0, PROMPT)
    reference = greedy_generate(model, new_state(config), 0, PROMPT, 5)
    drafts = reference[1:4]
    words = mask_words(config.vocab_size)

    free = _round(model, base.clone(), first, drafts, SamplingTensors.greedy(1))
    assert int(free.num_accepted[0]) == 3

    everything = SamplingTensors.greedy(1)
    everything.token_mask = torch.full((1, words), -1, dtype=torch.int32)
    everything.is_masked = torch.ones(1, dtype=torch.bool)
    masked = _round(model, base.clone(), first, drafts, everything)
    assert masked.output_tokens[0].tolist() == [reference[1], -1, -1, -1]

    forced = (reference[1] + 1) % config.vocab_size
    only = SamplingTensors.greedy(1)
    only.token_mask = torch.zeros(1, words, dtype=torch.int32)
    only.token_mask[0, forced // 32] = torch.tensor(1 << (forced % 32)).to(torch.int32)
    only.is_masked = torch.ones(1, dtype=torch.bool)
    assert _round(model, base.clone(), first, drafts, only).output_tokens[0, 0] == forced


def test_a_json_string_never_admits_a_token_holding_a_raw_control_byte():
    """xgrammar 0.2.9's rule for a string with maxLength admits bytes 0x00-0x1F, which
    strict JSON forbids; the grammar's token filter drops them."""
    schema = {"type": "object", "properties": {"a": {"type": "string", "maxLength": 6}}}
    state = GrammarState(compiler().compile(GrammarSpec("json_schema", json.dumps(schema), "x")))
    for token in tokenizer().encode('{"a": "').ids:
        assert state.accept(token)
    table = torch.full((1, mask_words(MODEL_VOCAB)), -1, dtype=torch.int32)
    state.fill(table, 0)
    allowed = apply_token_mask(torch.zeros(1, MODEL_VOCAB), table, torch.ones(1, dtype=bool))
    ids = torch.isfinite(allowed[0]).nonzero().flatten().tolist()
    texts = [tokenizer().decode([i]) for i in ids]
    assert "a" in texts
    assert not any(ord(c) < 0x20 for text in texts for c in text)


def test_the_lazy_compiler_imports_no_xgrammar_until_a_grammar_is_asked_for():
    code = (
        "import sys\n"
        "from ignition.runtime.grammar import LazyGrammarCompiler\n"
        "LazyGrammarCompiler(None, 8, [0])\n"
        "assert 'xgrammar' not in sys.modules and 'transformers' not in sys.modules\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_a_tokenizer_xgrammar_cannot_read_fails_each_grammar_request_naming_its_field():
    lazy = LazyGrammarCompiler(object(), 8, [0])
    with pytest.raises(GrammarError) as caught:
        lazy.compile(GrammarSpec("regex", "a+", "guided_regex"))
    assert caught.value.param == "guided_regex"
    assert "this server has no structured outputs" in str(caught.value)


def test_a_server_that_cannot_serve_grammars_says_why_naming_the_field():
    lazy = LazyGrammarCompiler.unavailable("not yet with tensor parallelism")
    with pytest.raises(GrammarError) as caught:
        lazy.compile(GrammarSpec("json_object", "", "response_format"))
    assert caught.value.param == "response_format"
    assert "no structured outputs: not yet with tensor parallelism" in str(caught.value)


def test_a_gated_grammar_constrains_nothing_until_its_gate_then_everything():
    """A reasoning reply: free text up to the end tag's tokens, the grammar after them."""
    spec = GrammarSpec("choice", json.dumps(["ok"]), "structured_outputs.choice")
    gate = tuple(tokenizer().encode("</think>").ids)
    state = GrammarState(replace(compiler().compile(spec), gate=gate))
    table = torch.zeros((1, mask_words(MODEL_VOCAB)), dtype=torch.int32)
    state.fill(table, 0)
    free = ~torch.isneginf(
        apply_token_mask(torch.zeros(1, MODEL_VOCAB), table, torch.ones(1, dtype=bool))
    )[0]
    assert free.nonzero().numel() == MODEL_VOCAB - 1 and not free[EOS]  # all but the end
    for token in [*tokenizer().encode("x < y").ids, *gate]:
        assert state.accept(token)
    assert not state.is_gated
    state.fill(table, 0)
    allowed = apply_token_mask(torch.zeros(1, MODEL_VOCAB), table, torch.ones(1, dtype=bool))
    texts = {tokenizer().decode([i]) for i in torch.isfinite(allowed[0]).nonzero().flatten()}
    assert texts and all("ok".startswith(text) for text in texts)


def _allowed(state: GrammarState) -> torch.Tensor:
    table = torch.full((1, mask_words(MODEL_VOCAB)), -1, dtype=torch.int32)
    state.fill(table, 0)
    return ~torch.isneginf(
        apply_token_mask(torch.zeros(1, MODEL_VOCAB), table, torch.ones(1, dtype=bool))
    )[0]


def test_no_grammar_lets_a_utf8_encoded_surrogate_through():
    """xgrammar 0.2.9 admits ED A0-BF xx (a surrogate, not UTF-8: three U+FFFD in the
    text) inside a JSON string; after a token ending in the lead byte 0xED no token may
    start with 0xA0-0xBF, while ED 80-9F (U+D000-U+D7FF) stays allowed."""
    from transformers import PreTrainedTokenizerFast

    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer())
    info = xgr.TokenizerInfo.from_huggingface(fast, vocab_size=MODEL_VOCAB, stop_token_ids=[EOS])
    byte_id = {b[0]: i for i, b in enumerate(info.decoded_vocab) if len(b) == 1}
    schema = json.dumps({"type": "object", "properties": {"name": {"type": "string"}}})
    state = GrammarState(compiler().compile(GrammarSpec("json_schema", schema, "f")))
    for token in tokenizer().encode('{"name": "', add_special_tokens=False).ids:
        assert state.accept(token)
    assert state.accept(byte_id[0xED])
    allowed = _allowed(state)
    assert bool(allowed[byte_id[0x80]]) and bool(allowed[byte_id[0x9F]])
    assert not bool(allowed[byte_id[0xA0]]) and not bool(allowed[byte_id[0xBF]])
    assert state.accept(byte_id[0x80])  # U+D000 ... continues as UTF-8
    assert bool(_allowed(state)[byte_id[0x80]])


def _single_token_masked(model, state, pending, masks, params):
    """Masked single-token decoding: one round per position, no drafts, mask j at step j."""
    tokens = []
    for mask in masks:
        step = replace(params, token_mask=mask[None], is_masked=torch.ones(1, dtype=torch.bool))
        inputs = RoundInputs(
            pending_tokens=torch.tensor([pending]),
            slot_ids=torch.tensor([0], dtype=torch.int32),
            query_lens=torch.tensor([1], dtype=torch.int32),
        )
        out = speculative_round(model, state, inputs, RoundCapacity(1, 0, 1, 1), step, False)
        pending = int(out.output_tokens[0, 0])
        tokens.append(pending)
    return tokens


def _per_position_round(model, state, pending, drafts, masks, params):
    """One round verifying ``drafts`` (supplied) with mask j at verification position j."""
    width = masks.shape[0]
    inputs = RoundInputs(
        pending_tokens=torch.tensor([pending]),
        slot_ids=torch.tensor([0], dtype=torch.int32),
        query_lens=torch.tensor([width], dtype=torch.int32),
        supplied_drafts=torch.tensor([drafts]),
        position_masks=masks[None],
    )
    masked = replace(params, token_mask=masks[None, 0], is_masked=torch.ones(1, dtype=torch.bool))
    capacity = RoundCapacity(1, width - 1, width, width)
    return speculative_round(model, state, inputs, capacity, masked, False)


SAMPLINGS = {
    "greedy": lambda: SamplingTensors.greedy(1),
    "sampled": lambda: SamplingTensors.build([1.0], top_k=[50], seed=[11]),
}


@pytest.mark.parametrize("sampling", list(SAMPLINGS))
def test_each_verification_position_samples_under_its_own_mask(model, sampling):
    """Supplied drafts equal to masked single-token decoding are all accepted and the bonus
    token follows mask 3: the round emits exactly what the single-token loop emits."""
    config = model.config
    base = new_state(config)
    first = prefill(model, base, 0, PROMPT)
    masks = random_bitmask(4, config.vocab_size, seed=5)
    params = SAMPLINGS[sampling]()
    expected = _single_token_masked(model, base.clone(), first, masks, params)
    out = _per_position_round(model, base.clone(), first, expected[:3], masks, params)
    assert out.output_tokens[0].tolist() == expected
    # the test has power: under position 0's mask alone, later positions sample otherwise
    only_first = masks.clone()
    only_first[1:] = -1
    assert _single_token_masked(model, base.clone(), first, only_first, params) != expected


@pytest.mark.parametrize("sampling", list(SAMPLINGS))
def test_a_rejected_draft_is_replaced_by_the_masked_sample_at_its_position(model, sampling):
    config = model.config
    base = new_state(config)
    first = prefill(model, base, 0, PROMPT)
    masks = random_bitmask(4, config.vocab_size, seed=6)
    params = SAMPLINGS[sampling]()
    expected = _single_token_masked(model, base.clone(), first, masks, params)
    wrong = next(t for t in range(config.vocab_size) if t != expected[1])
    drafts = [expected[0], wrong, expected[2]]
    out = _per_position_round(model, base.clone(), first, drafts, masks, params)
    assert out.output_tokens[0].tolist() == [*expected[:2], -1, -1]


def test_a_masked_row_without_supplied_drafts_still_verifies_none(model):
    """Its drafts would be the MTP head's, which the host never masked: width 1."""
    config = model.config
    base = new_state(config)
    first = prefill(model, base, 0, PROMPT)
    masks = torch.full((4, mask_words(config.vocab_size)), -1, dtype=torch.int32)
    out = _per_position_round(
        model, base.clone(), first, [-1, -1, -1], masks, SAMPLINGS["greedy"]()
    )
    reference = greedy_generate(model, new_state(config), 0, PROMPT, 2)
    assert out.output_tokens[0].tolist() == [reference[1], -1, -1, -1]


def test_supplied_drafts_end_at_the_first_minus_one(model):
    config = model.config
    base = new_state(config)
    first = prefill(model, base, 0, PROMPT)
    reference = greedy_generate(model, new_state(config), 0, PROMPT, 5)
    inputs = RoundInputs(
        pending_tokens=torch.tensor([first]),
        slot_ids=torch.tensor([0], dtype=torch.int32),
        query_lens=torch.tensor([4], dtype=torch.int32),
        supplied_drafts=torch.tensor([[reference[1], -1, reference[3]]]),
    )
    out = speculative_round(
        model, base.clone(), inputs, RoundCapacity(1, 3, 4, 4), SamplingTensors.greedy(1), True
    )
    assert int(out.query_lens[0]) == 2
    assert out.output_tokens[0].tolist() == [reference[1], reference[2], -1, -1]


def test_walking_the_drafts_writes_each_positions_mask_and_leaves_the_matcher_as_it_was():
    schema = json.dumps({"type": "object", "properties": {"a": {"type": "integer"}}})
    state = GrammarState(compiler().compile(GrammarSpec("json_schema", schema, "f")))
    drafts = tokenizer().encode('{"a": 12', add_special_tokens=False).ids
    words = mask_words(MODEL_VOCAB)
    walked = torch.zeros(len(drafts) + 1, words, dtype=torch.int32)
    assert state.fill_positions(walked, drafts) == len(drafts)
    before = torch.zeros(1, words, dtype=torch.int32)
    state.fill(before, 0)
    assert torch.equal(before[0], walked[0])  # rolled back
    stepwise = GrammarState(compiler().compile(GrammarSpec("json_schema", schema, "f")))
    for j, token in enumerate(drafts):
        expected = torch.zeros(1, words, dtype=torch.int32)
        stepwise.fill(expected, 0)
        assert torch.equal(expected[0], walked[j]), j
        assert stepwise.accept(token)


def test_the_walk_stops_before_the_first_draft_the_grammar_forbids():
    schema = json.dumps({"type": "object", "properties": {"a": {"type": "integer"}}})
    state = GrammarState(compiler().compile(GrammarSpec("json_schema", schema, "f")))
    good = tokenizer().encode('{"a": 1', add_special_tokens=False).ids
    bad = tokenizer().encode("x", add_special_tokens=False).ids
    masks = torch.zeros(len(good) + 3, mask_words(MODEL_VOCAB), dtype=torch.int32)
    assert state.fill_positions(masks, [*good, *bad, *good]) == len(good)
    assert not state.is_broken
    assert all(state.accept(t) for t in good)


def test_a_schema_forces_its_first_key_as_drafts():
    state = GrammarState(compiler().compile(GrammarSpec("json_schema", json.dumps(SCHEMA), "f")))
    forced = state.forced_drafts()
    assert tokenizer().decode(list(forced)).startswith('{"name"')
    assert all(state.accept(t) for t in forced)
