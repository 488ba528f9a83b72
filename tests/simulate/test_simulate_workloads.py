"""Workloads: Azure trace windows with rate scale and caps, Poisson, multi-turn
conversations and a per-position acceptance model (issue 12 item 3)."""

from __future__ import annotations

import itertools
import random
from pathlib import Path

import pytest

from ignition.simulate import traces
from ignition.simulate.workloads import (
    AcceptanceModel,
    WorkloadError,
    conversations,
    load_trace,
    poisson,
    with_acceptance,
)

DATA = str(traces.AZURE_2023)
CONV = f"{DATA}/conv.csv"


def _write(tmp_path, text: str):
    path = tmp_path / "trace.csv"
    path.write_text(text)
    return path


TRACE = (
    "TIMESTAMP,ContextTokens,GeneratedTokens\n"
    "2023-11-16 18:15:46.0000000,100,10\n"
    "2023-11-16 18:15:47.0000000,5000,900\n"
    "2023-11-16 18:15:49.5000000,300,0\n"
)


def test_a_trace_window_starts_at_its_first_row_and_rate_scale_compresses_arrivals(tmp_path):
    path = _write(tmp_path, TRACE)
    plain = load_trace(path)
    assert [r.arrival_ms for r in plain] == pytest.approx([0.0, 1000.0, 3500.0])
    window = load_trace(path, start=1, count=2, rate_scale=2.0)
    assert [r.arrival_ms for r in window] == pytest.approx([0.0, 1250.0])
    assert window[0].prompt_tokens == 5000


def test_caps_bound_prompt_and_output_and_empty_outputs_become_one_token(tmp_path):
    reqs = load_trace(_write(tmp_path, TRACE), max_prompt=2048, max_output=256)
    assert [(r.prompt_tokens, r.output_tokens) for r in reqs] == [(100, 10), (2048, 256), (300, 1)]


@pytest.mark.parametrize("name", ["conv", "code"])
def test_both_azure_traces_load(name):
    reqs = load_trace(f"{DATA}/{name}.csv", start=2000, count=50)
    assert len(reqs) == 50 and reqs[0].arrival_ms == 0.0
    assert all(b.arrival_ms >= a.arrival_ms for a, b in itertools.pairwise(reqs))


def test_a_trace_missing_a_column_fails_naming_the_column(tmp_path):
    path = _write(tmp_path, "TIMESTAMP,ContextTokens\n2023-11-16 18:15:46.0,100\n")
    with pytest.raises(WorkloadError, match="missing column 'GeneratedTokens'"):
        load_trace(path)


def test_a_negative_rate_fails_naming_the_rate():
    with pytest.raises(WorkloadError, match=r"rate = -1.0: must be a positive load scale"):
        load_trace(CONV, rate_scale=-1.0)


def test_a_bad_cell_fails_naming_line_and_column(tmp_path):
    path = _write(tmp_path, "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.0,x,3\n")
    with pytest.raises(WorkloadError, match=r"trace\.csv:2: ContextTokens = 'x'"):
        load_trace(path)


def test_poisson_arrivals_have_the_requested_mean_rate():
    reqs = poisson(20.0, 2000, prompt_tokens=(64, 128), output_tokens=(8,), seed=1)
    rate = (len(reqs) - 1) / ((reqs[-1].arrival_ms - reqs[0].arrival_ms) / 1e3)
    assert rate == pytest.approx(20.0, rel=0.1)
    assert {r.prompt_tokens for r in reqs} == {64, 128}


def test_each_conversation_turn_resends_the_history_a_retaining_server_holds():
    reqs = conversations(3, 4, first_prompt=500, turn_prompt=50, output_tokens=20, seed=2)
    convo = sorted((r for r in reqs if r.conversation == 0), key=lambda r: r.turn)
    assert [r.cached_prefix for r in convo] == [0, 520, 590, 660]
    assert [r.prompt_tokens for r in convo] == [500, 570, 640, 710]
    assert all(b.arrival_ms > a.arrival_ms for a, b in itertools.pairwise(convo))


def test_acceptance_is_per_position_and_spread_varies_requests(tmp_path):
    model = AcceptanceModel((0.9, 0.5), spread=0.3)
    drawn = [model.draw(random.Random(i)) for i in range(20)]
    assert all(len(a) == 2 and all(0 <= p <= 1 for p in a) for a in drawn)
    assert len(set(drawn)) > 1
    reqs = with_acceptance(load_trace(_write(tmp_path, TRACE)), AcceptanceModel((0.8, 0.7)))
    assert all(r.acceptance == (0.8, 0.7) for r in reqs)


def test_an_acceptance_outside_zero_one_is_rejected_naming_the_position():
    with pytest.raises(WorkloadError, match=r"acceptance\[1\] = 1.5"):
        AcceptanceModel((0.5, 1.5))
