"""Issue 40: ``scripts/scheduling_sim/study_ceiling.py`` bounds the conversation study's
capacity by the best mix of frames the device model prices (a linear programme)."""

from __future__ import annotations

import pytest

from ignition.simulate.devices import device_from_spec
from scripts.scheduling_sim.study_ceiling import (
    Demand,
    Frame,
    best_generation,
    frames_for,
    lp_ceiling,
    measured,
)

# per load unit: 1 output and 5 prompt tokens per ms
DEMAND = Demand(output_per_ms=1.0, prompt_per_ms=5.0, context=100, expected=(1.0, 1.5))
DECODE = Frame(8, 1, 0, 4.0, 8.0, 0)  # 2 output tokens per ms
PREFILL = Frame(0, 1, 100, 10.0, 0.0, 100)  # 10 prompt tokens per ms


def test_separate_frames_split_the_time():
    # each load unit needs 1/2 of the device for decode and 5/10 for prompts: L* = 1
    assert lp_ceiling([DECODE, PREFILL], DEMAND) == pytest.approx(1.0, rel=1e-3)


def test_a_mixed_frame_doing_both_at_once_doubles_it():
    mixed = Frame(8, 1, 100, 10.0, 20.0, 100)  # 2 output and 10 prompt tokens per ms
    assert lp_ceiling([DECODE, PREFILL, mixed], DEMAND) == pytest.approx(2.0, rel=1e-3)


def test_the_bound_follows_the_cheapest_frame_when_prompts_are_few():
    few_prompts = Demand(1.0, 1e-6, 100, (1.0,))
    slow = Frame(8, 1, 0, 8.0, 8.0, 0)  # 1 token per ms
    assert lp_ceiling([slow, DECODE, PREFILL], few_prompts) == pytest.approx(2.0, rel=1e-3)


def test_work_no_frame_does_bounds_it_at_zero():
    assert lp_ceiling([DECODE], DEMAND) == 0.0


def test_no_frames_is_one_line():
    with pytest.raises(ValueError, match="no frames"):
        lp_ceiling([], DEMAND)


def test_frames_deliver_expected_output_at_their_width():
    device = device_from_spec("qwen38-flash-next-h200")
    frames = frames_for(device, DEMAND)
    wide = next(f for f in frames if f.batch == 4 and f.width == 2 and f.chunk == 0)
    assert wide.output_tokens == pytest.approx(4 * 1.5)
    assert all(f.batch * f.width <= 128 for f in frames if f.width > 1)
    assert best_generation(frames, DEMAND).chunk == 0


def test_measured_reads_the_study_block(tmp_path):
    docs = tmp_path / "capacity.md"
    docs.write_text("| p | `vllm-k1-padded` | 0.569 | 0.94x |\n| p | `helios` | 0.5 | 1.00x |\n")
    assert measured("p", docs) == 0.569
    assert measured("q", docs) is None
