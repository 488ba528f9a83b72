"""Issue 12: the decode-throughput ceiling bounds what any policy sustains once every
slot decodes: the best B * E[out(W)] / T(B, W) over batches up to the slots and widths
within the build envelope."""

from __future__ import annotations

import pytest

from ignition.simulate.bounds import expected_output, throughput_ceiling
from ignition.simulate.devices import H200Roofline

ACCEPTANCE = (0.8, 0.7, 0.6, 0.5, 0.4)


def test_expected_output_adds_the_joint_survival_of_each_draft():
    assert expected_output(ACCEPTANCE, 1) == 1.0
    assert expected_output(ACCEPTANCE, 3) == pytest.approx(1 + 0.8 + 0.8 * 0.7)


def test_the_ceiling_keeps_b_times_w_within_the_envelope_and_never_exceeds_the_open_one():
    device = H200Roofline()
    bound = throughput_ceiling(device, 32, ACCEPTANCE, envelope=128)
    free = throughput_ceiling(device, 32, ACCEPTANCE)
    assert bound.width == 1 or bound.batch * bound.width <= 128
    assert bound.tokens_per_ms <= free.tokens_per_ms


def test_the_ceiling_is_the_best_frame_over_every_batch_and_width():
    device = H200Roofline()
    best = throughput_ceiling(device, 8, ACCEPTANCE, envelope=16)
    smaller = throughput_ceiling(device, 8, ACCEPTANCE, envelope=16, max_width=1)
    assert best.tokens_per_ms >= smaller.tokens_per_ms
    assert best.tokens_per_ms == pytest.approx(
        best.batch * expected_output(ACCEPTANCE, best.width) / best.duration_ms
    )
