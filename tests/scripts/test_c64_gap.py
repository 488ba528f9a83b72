"""``scripts/scheduling_sim/c64_gap.py``: frame categories and the vllm-padded reference."""

from __future__ import annotations

from ignition.simulate.devices import device_from_spec
from ignition.simulate.results import ExecutionRecord
from scripts.scheduling_sim.c64_gap import category, reference_ms

DEVICE = device_from_spec("qwen38-flash-next-4xh100")


def _frame(decoders: int, prompt: int = 0, width: int = 1) -> ExecutionRecord:
    return ExecutionRecord(
        0.0, 1.0, "x", "x", decoders=decoders, prompt_tokens=prompt, width=width
    )


def test_frames_fall_in_one_category_each():
    assert category(_frame(60, 1024)) == "prompt"
    assert category(_frame(36, 64)) == "64-token chunk"
    assert category(_frame(32, width=2)) == "width > 1"
    assert category(_frame(48)) == "width 1"


def test_the_reference_pads_as_vllm_padded_does():
    """Decoders pad to vLLM's capture sizes (every 8 tokens here): the 49th decoder
    pays a padding step to 56 the 48th does not, and a width-two frame is priced at
    width one."""
    ms = {n: reference_ms(DEVICE, 64, _frame(n)) for n in (47, 48, 49)}
    assert ms[49] - ms[48] > 2 * (ms[48] - ms[47])
    assert reference_ms(DEVICE, 64, _frame(32, width=2)) == reference_ms(DEVICE, 64, _frame(32))
