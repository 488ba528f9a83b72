"""The newcomer rule of docs/scheduling.md (issue 12): a request without token history
starts at parity with a decoder served at the fastest batch-feasible rate."""

from __future__ import annotations

import pytest
from helios_helpers import decode, prefill, request, scheduler

from ignition.helios import utility
from ignition.helios.projection import current_normalizers


def test_a_newcomer_starts_at_the_best_generation_graphs_per_stream_rate():
    measured = [(prefill(4096), 62.0), (decode(8), 10.0), (decode(32), 27.0)]
    # four streams: decode(8) gives each 1 token per 10 ms; prefill graphs do not count
    assert utility.generation_start_rate(measured, 4) == pytest.approx(0.1)
    assert utility.normalizer_start_rate(measured, 4) == pytest.approx(4096 / (4 * 62.0))


def test_without_a_measured_generation_graph_the_rule_falls_back_to_every_graph():
    assert utility.generation_start_rate([(prefill(512), 50.0)], 2) == pytest.approx(512 / 100)


def test_the_scheduler_prices_newcomers_from_the_rule():
    s = scheduler([prefill(4096), decode(8)], {prefill(4096): 62.0, decode(8): 10.0})
    for _ in range(4):
        s.admit(request(2000))
    norms = current_normalizers(s.descriptors, s.costs, s.requests.values())
    assert norms.token_rate == pytest.approx(0.1)


def test_a_newcomers_prompt_token_outprices_the_normalizer_rule():
    """The measured cause: under the normalizer rule a prompt token was worth ~1.7 value
    units against a decoder's ~180, so prompts waited until their price grew."""
    measured = [(prefill(4096), 62.0), (decode(8), 10.0)]
    fairness = 16.0
    new = 1 + fairness / utility.generation_start_rate(measured, 8)
    old = 1 + fairness / utility.normalizer_start_rate(measured, 8)
    assert new > 50 * old
