"""Issue 31, the Qwen3.8-Flash-Next MTP head as vLLM loads it: ``mtp.*`` loads into the gated
head, and recursive draft steps (one position per lane past the committed length, raw index
keys in the round's draft ring) compute what one frame over the same positions and inputs
computes, across a compression-block boundary; the multi-stream output feeds the next step."""

from __future__ import annotations

import torch

from ignition.model.mtp_gated import GatedMtpHead
from ignition.model.packing import PackedCapacity, PackedMeta
from tests.model.conftest import new_state
from tests.model.helpers import committed_blocks, prefill

PROMPT = [(37 * i + 11) % 4000 + 9 for i in range(21)]  # the drafts cross the block at 24
DRAFTS = [5, 900, 77, 3000]


def test_the_mtp_head_loads_with_its_indexer_and_the_trunks_stream_count(qwen4_model):
    assert isinstance(qwen4_model.mtp, GatedMtpHead)
    assert qwen4_model.config.mtp_num_layers == 1
    assert qwen4_model.mtp.layers[0].self_attn.indexer is not None
    state = new_state(qwen4_model.config)
    config = qwen4_model.config
    assert state.mtp_hidden.shape[1] == config.hc_streams * config.hidden_size


@torch.no_grad()
def test_recursive_draft_steps_equal_one_frame_over_the_same_inputs(qwen4_model):
    model = qwen4_model
    state = new_state(model.config)
    prefill(model, state, 0, PROMPT)
    width = model.config.hc_streams * model.config.hidden_size
    hiddens = torch.randn(len(DRAFTS), width, generator=torch.Generator().manual_seed(2))
    tokens = torch.tensor(DRAFTS)

    framed = state.clone()
    capacity = PackedCapacity.mixed(1, len(DRAFTS), 0)
    meta = PackedMeta.build(
        capacity,
        torch.tensor([len(DRAFTS)], dtype=torch.int32),
        torch.tensor([0], dtype=torch.int32),
        torch.tensor([-1], dtype=torch.int32),
        framed,
    )
    expected, _ = model.mtp(model.embed_tokens(tokens), hiddens, meta, framed, meta.kv_slots)

    slots = torch.tensor([0], dtype=torch.int32)
    for k in range(len(DRAFTS)):
        got = model.draft_step(tokens[k : k + 1], hiddens[k : k + 1], slots, k, state)
        torch.testing.assert_close(got[0], expected[k], atol=1e-5, rtol=0)


@torch.no_grad()
def test_draft_steps_leave_the_committed_mtp_ring_and_blocks_alone(qwen4_model):
    model = qwen4_model
    state = new_state(model.config)
    prefill(model, state, 0, PROMPT)
    before = state.clone()
    slots = torch.tensor([0], dtype=torch.int32)
    hidden = state.mtp_hidden[:1]
    for k, token in enumerate(DRAFTS):
        hidden = model.draft_step(torch.tensor([token]), hidden, slots, k, state)
    assert torch.equal(state.mtp_index_raw, before.mtp_index_raw)
    got, expected = (
        committed_blocks(state, "mtp_index_keys"),
        committed_blocks(before, "mtp_index_keys"),
    )
    assert got[0].shape[1] == len(PROMPT) // model.config.qsa_indexer.compress_ratio
    assert torch.equal(got[0], expected[0])
