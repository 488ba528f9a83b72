"""Issue 13, speculation with images: MTP draft positions use the request's multimodal rope
offset. Rotary attention depends on position differences only, so a request whose every
position (prompt, verification, absorbed draft context and recursive drafts) is shifted by
the same offset must draft exactly as the unshifted one; a draft step that ignored the
offset would put its queries off by that offset from the history it attends to."""

from __future__ import annotations

import torch

from ignition.model.packing import PackedCapacity, PackedInputs
from ignition.model.sampling import SamplingTensors
from ignition.model.speculative import RoundCapacity, RoundInputs, speculative_round
from ignition.model.step import run_step
from tests.model.conftest import new_state

PROMPT = [3, 14, 15, 92, 65, 35, 89, 79, 32, 38, 46]
ROUND = RoundCapacity(batch_capacity=1, proposal_depth=3, verify_width=4, packed_capacity=4)


def rounds(model, config, prefill_offset: int, round_offset: int | None, num_rounds: int = 3):
    """(draft tokens, per-position confidence) of each greedy round after the prompt."""
    state = new_state(config)
    capacity = PackedCapacity.mixed(1, 1, 64)
    inputs = PackedInputs.build(capacity, [PROMPT], [0], prefill_row=0)
    inputs.rope_offset = torch.tensor([prefill_offset], dtype=torch.int32)
    pending = run_step(model, state, inputs, capacity, SamplingTensors.greedy(1)).next_tokens
    out = []
    for _ in range(num_rounds):
        lanes = RoundInputs(
            pending_tokens=pending.clone(),
            slot_ids=torch.tensor([0], dtype=torch.int32),
            query_lens=torch.tensor([4], dtype=torch.int32),
            rope_offset=None if round_offset is None else torch.tensor([round_offset]),
        )
        result = speculative_round(model, state, lanes, ROUND, SamplingTensors.greedy(1), True)
        out.append((result.draft_tokens.clone(), result.confidence[0].clone()))
        emitted = [t for t in result.output_tokens[0].tolist() if t >= 0]
        pending = torch.tensor([emitted[-1]])
    return out


def test_drafts_of_a_request_with_a_rope_offset_equal_those_without_it(config, model):
    plain = rounds(model, config, 0, 0)
    shifted = rounds(model, config, 37, 37)
    for (drafts, confidence), (drafts_s, confidence_s) in zip(plain, shifted, strict=True):
        assert drafts.tolist() == drafts_s.tolist()
        torch.testing.assert_close(confidence_s, confidence, atol=1e-4, rtol=0)


def test_a_round_that_drops_the_offset_drafts_differently(config, model):
    """The check above is sensitive: positions off by the offset change the drafts'
    confidences."""
    plain = rounds(model, config, 37, 37, num_rounds=1)
    dropped = rounds(model, config, 37, None, num_rounds=1)
    assert not torch.allclose(plain[0][1], dropped[0][1], atol=1e-4)
