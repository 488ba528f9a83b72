"""QSA's compressed index keys may be stored in FP8 (e4m3), an option that is off by default:
the keys stay within 4 % (relative L2) of bf16 storage and the selection of most queries is
unchanged. The measured errors print beside bf16's own against fp32 storage (a peer in the
same run); the FP8 Triton paths need a GPU (the interpreter has no fp8) and are in
scripts/gpu_check_qsa.py."""

from __future__ import annotations

import torch

from ignition.kernels import ops
from ignition.model.packing import PackedCapacity, PackedInputs
from ignition.model.sampling import SamplingTensors
from ignition.model.state import ModelState
from ignition.model.step import run_step
from tests.model.conftest import MAX_PAGES_PER_SLOT, NUM_SLOTS, PAGE_SIZE, contiguous_pages

KEY_ERROR_BOUND = 0.04  # e4m3 keeps 3 mantissa bits: 2^-4 relative rounding at worst
MIN_SAME_SELECTION = 0.9
PROMPT = torch.randint(9, 4096, (56,), generator=torch.Generator().manual_seed(5)).tolist()


def allocate(config, index_key_dtype=None) -> ModelState:
    state = ModelState.allocate(
        config,
        num_slots=NUM_SLOTS,
        num_pages=NUM_SLOTS * MAX_PAGES_PER_SLOT,
        page_size=PAGE_SIZE,
        max_pages_per_slot=MAX_PAGES_PER_SLOT,
        index_key_dtype=index_key_dtype,
    )
    contiguous_pages(state)
    return state


def prefill_with(model, index_key_dtype, monkeypatch):
    """(logits [P, V], state, the selections of every QSA layer) of the prompt."""
    state = allocate(model.config, index_key_dtype)
    selections = []
    original = ops.qsa_sparse_attention

    def spy(q, k_cache, v_cache, page_table, token_row, selected, scale):
        selections.append(selected.sort(dim=1).values)
        return original(q, k_cache, v_cache, page_table, token_row, selected, scale)

    monkeypatch.setattr(ops, "qsa_sparse_attention", spy)
    capacity = PackedCapacity.mixed(1, 1, 64)
    inputs = PackedInputs.build(capacity, [PROMPT], [0], prefill_row=0)
    with torch.no_grad():
        out = run_step(model, state, inputs, capacity, SamplingTensors.greedy(1))
    monkeypatch.setattr(ops, "qsa_sparse_attention", original)
    return out.target.logits[: len(PROMPT)], state, selections


def same_selection(a: list[torch.Tensor], b: list[torch.Tensor]) -> float:
    rows = [(x[: len(PROMPT)] == y[: len(PROMPT)]).all(dim=1) for x, y in zip(a, b, strict=True)]
    return torch.cat(rows).float().mean().item()


def test_fp8_index_keys_are_off_by_default(qwen4_model):
    state = allocate(qwen4_model.config)
    assert state.index_keys.dtype == state.k_cache.dtype
    assert allocate(qwen4_model.config, torch.float8_e4m3fn).index_keys.dtype == (
        torch.float8_e4m3fn
    )


def test_fp8_index_keys_stay_close_to_bf16_and_keep_most_selections(qwen4_model, monkeypatch):
    runs = {
        name: prefill_with(qwen4_model, dtype, monkeypatch)
        for name, dtype in (
            ("fp32", torch.float32),
            ("bf16", torch.bfloat16),
            ("fp8", torch.float8_e4m3fn),
        )
    }
    bf16_keys = runs["bf16"][1].index_keys.float()
    fp8_keys = runs["fp8"][1].index_keys.float()
    key_error = ((fp8_keys - bf16_keys).norm() / bf16_keys.norm()).item()
    for name, peer in (("fp8 vs bf16", ("fp8", "bf16")), ("bf16 vs fp32", ("bf16", "fp32"))):
        a, b = runs[peer[0]], runs[peer[1]]
        print(
            f"{name}: max |logit diff| {(a[0] - b[0]).abs().max().item():.4f}, "
            f"identical selections {same_selection(a[2], b[2]):.3f}"
        )
    print(f"fp8 vs bf16 block keys: relative L2 error {key_error:.4f}")
    assert key_error < KEY_ERROR_BOUND
    assert same_selection(runs["fp8"][2], runs["bf16"][2]) >= MIN_SAME_SELECTION
