"""``Descriptor.verify_rows``: the one owner of min(D + 1, W), the rows a lane of one round
verifies, which Helios's ceilings, bounds and forecasts all read."""

from __future__ import annotations

import pytest

from ignition.components.descriptor import Descriptor
from ignition.components.program_kinds import GraphKind


def _spec(depth: int, width: int, enabled: bool = True) -> Descriptor:
    return Descriptor(
        GraphKind.SPECULATIVE, 2, depth, width, 2 * width, speculation_enabled=enabled
    )


@pytest.mark.parametrize(("depth", "width", "rows"), [(3, 4, 4), (7, 4, 4), (3, 1, 1), (0, 1, 1)])
def test_a_speculative_lane_verifies_its_proposals_and_pending_token_within_the_width(
    depth, width, rows
):
    assert _spec(depth, width).verify_rows == rows


def test_a_program_without_speculation_verifies_one_row():
    """The descriptor's rules (W = 1, or D = 0) make min(D + 1, W) one wherever
    speculation is off, so the owner needs no separate case for it."""
    assert _spec(3, 1, enabled=False).verify_rows == 1
    assert Descriptor(GraphKind.PREFILL, 1, 0, 512, 512).verify_rows == 1
    assert Descriptor(GraphKind.DECODE, 8, 0, 1, 8).verify_rows == 1
    mixed = Descriptor(GraphKind.MIXED, 4, 3, 1, 4, prefill_capacity=256)
    assert mixed.verify_rows == 1
