"""Drivers shared by the model tests: prompts and greedy decoding through run_step."""

from __future__ import annotations

import torch

from ignition.model.model import HybridModel
from ignition.model.packing import PackedCapacity, PackedInputs
from ignition.model.sampling import SamplingTensors
from ignition.model.state import SLOT_FIELDS, ModelState
from ignition.model.step import StepOutput, run_step

PROMPT_CAPACITY = 64


def prefill(
    model: HybridModel, state: ModelState, slot: int, prompt: list[int], chunk: int = 64
) -> int:
    """Consume ``prompt`` into ``slot`` in chunks; returns the first sampled (greedy) token."""
    capacity = PackedCapacity.mixed(1, 1, PROMPT_CAPACITY)
    token = -1
    for start in range(0, len(prompt), chunk):
        piece = prompt[start : start + chunk]
        is_last = start + chunk >= len(prompt)
        inputs = PackedInputs.build(
            capacity,
            [piece],
            [slot],
            prefill_row=0,
            prompt_next_token=-1 if is_last else prompt[start + chunk],
        )
        token = int(
            run_step(model, state, inputs, capacity, SamplingTensors.greedy(1)).next_tokens[0]
        )
    return token


def decode_rows(
    model: HybridModel,
    state: ModelState,
    rows: list[list[int]],
    slots: list[int],
    width: int,
    batch_capacity: int | None = None,
) -> StepOutput:
    capacity = PackedCapacity.mixed(batch_capacity or len(rows), width, 0)
    device = state.seq_lens.device
    inputs = PackedInputs.build(capacity, rows, slots, device=device)
    greedy = SamplingTensors.greedy(capacity.batch_capacity, device=device)
    return run_step(model, state, inputs, capacity, greedy)


def greedy_generate(
    model: HybridModel, state: ModelState, slot: int, prompt: list[int], num_tokens: int
) -> list[int]:
    """Reference decoding: one token per step, no speculation."""
    tokens = [prefill(model, state, slot, prompt)]
    while len(tokens) < num_tokens:
        out = decode_rows(model, state, [[tokens[-1]]], [slot], width=1)
        tokens.append(int(out.next_tokens[0]))
    return tokens


def committed_kv(state: ModelState, name: str) -> list[torch.Tensor]:
    """Per slot, the cache entries at its committed positions (what a later step can read)."""
    cache = getattr(state, name)  # [layers, pages, page_size, Hkv, Dh]
    flat = cache.flatten(1, 2)
    entries = []
    for slot in range(state.num_slots):
        positions = torch.arange(int(state.seq_lens[slot]))
        pages = state.page_table[slot, positions // state.page_size].long()
        entries.append(flat[:, pages * state.page_size + positions % state.page_size])
    return entries


def committed_blocks(state: ModelState, name: str = "index_keys") -> list[torch.Tensor]:
    """Per slot, the QSA block index keys (``name``) of its complete committed blocks."""
    cache = getattr(state, name)
    per_page = cache.shape[2]
    ratio = state.page_size // per_page
    flat = cache.flatten(1, 2)
    entries = []
    for slot in range(state.num_slots):
        starts = torch.arange(int(state.seq_lens[slot]) // ratio) * ratio
        pages = state.page_table[slot, starts // state.page_size].long()
        entries.append(flat[:, pages * per_page + (starts % state.page_size) // ratio])
    return entries


def assert_states_equal(a: ModelState, b: ModelState, atol: float = 1e-5) -> None:
    """Every per-slot tensor (every kind in SLOT_FIELDS), the committed KV entries and the
    committed block index keys agree (scratch row excluded).

    Cache entries past a slot's committed length are not state: nothing reads them before
    they are rewritten.
    """
    assert torch.equal(a.seq_lens[: a.num_slots], b.seq_lens[: b.num_slots])
    for name, dim in SLOT_FIELDS:
        got = getattr(a, name).narrow(dim, 0, a.num_slots)
        expected = getattr(b, name).narrow(dim, 0, b.num_slots)
        torch.testing.assert_close(got, expected, atol=atol, rtol=0, msg=name)
    for name in ("k_cache", "v_cache", "mtp_k_cache", "mtp_v_cache"):
        for got, expected in zip(committed_kv(a, name), committed_kv(b, name), strict=True):
            torch.testing.assert_close(got, expected, atol=atol, rtol=0)
    for name in ("index_keys", "mtp_index_keys"):
        pairs = zip(committed_blocks(a, name), committed_blocks(b, name), strict=True)
        for got, expected in pairs:
            torch.testing.assert_close(got, expected, atol=atol, rtol=0, msg=name)
