"""Issue 15: penalties, logit bias, min_tokens and min_p on the device, with vLLM's semantics.

The oracle here is a plain per-token transcription of vLLM's sampler rules (min_tokens,
then logit bias, then repetition over prompt and output, frequency and presence over
output; min_p after temperature), checked against the batched device code.
"""

from __future__ import annotations

from collections import Counter

import pytest
import torch

from ignition.model.logits_processing import (
    MAX_LOGIT_BIAS,
    MAX_STOP_IDS,
    HistoryBegin,
    SlotHistory,
    draft_counts,
    token_logprobs,
)
from ignition.model.sampling import SamplingTensors, target_distribution

VOCAB = 12


def vllm_rule(logits, prompt, output, rep=1.0, freq=0.0, pres=0.0, bias=(), min_tokens=0,
              stops=()):  # fmt: skip
    """One row, one token at a time, as vLLM's sampler processes it."""
    out = [float(x) for x in logits]
    if len(output) < min_tokens:
        for t in stops:
            out[t] = float("-inf")
    for t, b in bias:
        out[t] += b
    for t in set(prompt) | set(output):
        out[t] = out[t] / rep if out[t] > 0 else out[t] * rep
    for t, count in Counter(output).items():
        out[t] -= freq * count + pres
    return out


def begin_inputs(row: int, bias=(), stops=()) -> HistoryBegin:
    bias_ids = torch.full((MAX_LOGIT_BIAS,), -1, dtype=torch.int64)
    bias_values = torch.zeros(MAX_LOGIT_BIAS)
    stop_ids = torch.full((MAX_STOP_IDS,), -1, dtype=torch.int64)
    for i, (t, b) in enumerate(bias):
        bias_ids[i], bias_values[i] = t, b
    for i, t in enumerate(stops):
        stop_ids[i] = t
    return HistoryBegin(torch.tensor([row], dtype=torch.int32), bias_ids, bias_values, stop_ids)


def started(history: SlotHistory, slot: int, prompt, output, bias=(), stops=()) -> None:
    """A request in ``slot`` with this prompt and output so far, as the programs build it."""
    slots = torch.tensor([slot], dtype=torch.int32)
    history.begin(begin_inputs(0, bias, stops), slots)
    prompt_t = torch.tensor(prompt)
    history.add_prompt(slots, prompt_t, torch.ones(len(prompt), dtype=torch.bool))
    for token in output:
        history.record(slots, torch.tensor([[token]]))


CASES = [
    dict(rep=1.5),
    dict(freq=0.7),
    dict(pres=1.1),
    dict(rep=0.8, freq=-0.5, pres=0.3),
    dict(bias=((3, 5.0), (7, -100.0))),
    dict(min_tokens=4, stops=(2, 9)),
    dict(min_tokens=3, stops=(2,)),  # output already long enough: nothing masked
]


@pytest.mark.parametrize("case", CASES)
def test_processing_matches_vllms_rules_per_row(case):
    torch.manual_seed(1)
    prompt, output = [1, 4, 4, 6], [2, 5, 5, 5, 9] if case.get("min_tokens") == 3 else [5, 5, 8]
    history = SlotHistory.allocate(num_slots=3, vocab_size=VOCAB, device="cpu")
    started(history, 1, prompt, output, case.get("bias", ()), case.get("stops", ()))
    logits = torch.randn(1, VOCAB) * 3
    params = SamplingTensors.build(
        [1.0],
        repetition_penalty=[case.get("rep", 1.0)],
        frequency_penalty=[case.get("freq", 0.0)],
        presence_penalty=[case.get("pres", 0.0)],
        min_tokens=[case.get("min_tokens", 0)],
    )
    got = history.process(logits, torch.tensor([1]), params)[0].tolist()
    assert got == pytest.approx(vllm_rule(logits[0].tolist(), prompt, output, **case))


def test_a_new_request_in_a_slot_starts_from_a_clean_history():
    history = SlotHistory.allocate(num_slots=2, vocab_size=VOCAB, device="cpu")
    started(history, 0, [1, 2], [3, 3], bias=((4, 9.0),), stops=(5,))
    started(history, 0, [7], [])
    assert history.output_counts[0].sum() == 0 and history.num_output[0] == 0
    assert history.prompt_mask[0].nonzero().flatten().tolist() == [7]
    assert history.bias[0].abs().sum() == 0 and not history.stop_mask[0].any()


def test_padding_rows_never_touch_a_request_slot():
    history = SlotHistory.allocate(num_slots=2, vocab_size=VOCAB, device="cpu")
    started(history, 1, [1], [2])
    before = history.output_counts[1].clone()
    history.record(torch.tensor([-1, -1], dtype=torch.int32), torch.tensor([[3], [-1]]))
    history.begin(begin_inputs(-1, bias=((4, 1.0),)), torch.tensor([1], dtype=torch.int32))
    assert torch.equal(history.output_counts[1], before)
    assert history.bias[1].abs().sum() == 0


def test_each_verification_position_counts_the_drafts_before_it():
    drafts = torch.tensor([[4, 4, 6]])
    counts = draft_counts(drafts, width=4, vocab_size=VOCAB)[0]
    assert counts[0].sum() == 0
    assert counts[1, 4] == 1 and counts[1].sum() == 1
    assert counts[2, 4] == 2 and counts[2].sum() == 2
    assert counts[3, 4] == 2 and counts[3, 6] == 1 and counts[3].sum() == 3


def test_min_p_drops_tokens_below_min_p_times_the_best_probability():
    probs = torch.tensor([[0.5, 0.3, 0.15, 0.05]])
    params = SamplingTensors.build([1.0], min_p=[0.25])
    got = target_distribution(probs.log(), params)[0]
    kept = torch.tensor([0.5, 0.3, 0.15, 0.0])
    assert got.tolist() == pytest.approx((kept / kept.sum()).tolist())


def test_min_p_applies_after_temperature():
    logits = torch.tensor([[2.0, 1.0, 0.0]])
    hot = SamplingTensors.build([4.0], min_p=[0.5])
    # At temperature 4 the third token keeps exp(-0.5) of the best's probability: kept.
    assert target_distribution(logits, hot)[0, 2] > 0
    cold = SamplingTensors.build([1.0], min_p=[0.5])
    assert target_distribution(logits, cold)[0, 2] == 0


def test_logprobs_are_raw_log_softmax_with_the_top_alternatives_best_first():
    logits = torch.randn(3, VOCAB)
    tokens = torch.tensor([0, 5, 11])
    lp = token_logprobs(logits, tokens)
    expected = torch.log_softmax(logits, -1)
    assert lp.logprob.tolist() == pytest.approx(expected.gather(1, tokens[:, None])[:, 0].tolist())
    assert lp.top_ids.shape == (3, VOCAB)  # min(MAX_LOGPROBS, vocab)
    assert torch.equal(lp.top_ids[:, 0], expected.argmax(-1))
    assert (lp.top_logprobs[:, :-1] >= lp.top_logprobs[:, 1:]).all()


def test_a_carried_history_row_equals_its_source_in_every_table():
    history = SlotHistory.allocate(3, 11, "cpu")
    generator = torch.Generator().manual_seed(0)
    for table in (history.output_counts, history.prompt_mask, history.bias, history.stop_mask):
        table[1] = torch.randint(0, 3, (11,), generator=generator).to(table.dtype)
    history.num_output[1] = 7
    history.copy_row(1, 2)
    for table in (
        history.output_counts,
        history.num_output,
        history.prompt_mask,
        history.bias,
        history.stop_mask,
    ):
        assert torch.equal(table[2], table[1])
    assert history.num_output[0] == 0 and not history.prompt_mask[0].any()  # others untouched
