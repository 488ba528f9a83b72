"""The newcomer start bounded by the prompt a request can absorb (helios/state/prompt_starts.py,
docs/scheduling.md): x0(R) = sqrt(x_gen * x_norm(R)), x_norm(R) the best
min(useful / k, R) / T over the measured graphs."""

from __future__ import annotations

import math

import pytest
from helios_helpers import decode, mixed, prefill, request, scheduler
from hypothesis import given, settings
from hypothesis import strategies as st

from ignition.helios.config import PolicyConfig
from ignition.helios.decide.projection import newcomer_start
from ignition.helios.decide.service import prices
from ignition.helios.fast.projection import current_normalizers, python_normalizers
from ignition.helios.state.rates import ServiceRates
from ignition.helios.types import RequestSpec

# four streams: decode(8) gives each 1 token per 10 ms (x_gen = 0.1); the 4096 prefill
# offers each 1024 tokens in 62 ms (x_norm), the 256-token mixed graph 64.75 in 40 ms
MEASURED = [(prefill(4096), 62.0), (mixed(8, 256), 40.0), (decode(8), 10.0)]
X_GEN = 0.1
X_NORM = 1024 / 62.0


def _starts(graphs=MEASURED, k=4):
    return python_normalizers(graphs, k, 0, {}, "balanced")


def test_a_long_prompt_starts_exactly_at_the_balanced_rule():
    norms = _starts()
    assert norms.token_rate == math.sqrt(X_GEN * X_NORM)
    for prompt in (1024, 1025, 100_000):  # at least the winning graph's share
        assert norms.start_rate(prompt) == norms.token_rate


def test_a_short_prompt_starts_at_the_rate_a_graph_could_serve_it_at():
    norms = _starts()
    # 130 tokens: the 4096 prefill could give it 130 in 62 ms, the mixed graph its whole
    # 64.75-token share in 40 ms; the better one is the yardstick
    absorbable = max(130 / 62.0, (256 + 7) / 4 / 40.0)
    assert norms.start_rate(130) == pytest.approx(math.sqrt(X_GEN * absorbable))
    assert norms.start_rate(130) < norms.token_rate


def test_a_newcomer_never_starts_below_parity_with_the_best_served_decoder():
    norms = _starts()
    assert norms.start_rate(1) >= X_GEN
    shorter = [norms.start_rate(r) for r in (1, 2, 16, 64, 130, 512, 1024)]
    assert shorter == sorted(shorter)  # a longer prompt never starts lower


def test_a_short_prompt_is_priced_above_a_long_one():
    norms = _starts()
    policy = PolicyConfig()
    short = prices(ServiceRates(), norms, policy, False, prompt_tokens=130)
    long = prices(ServiceRates(), norms, policy, False, prompt_tokens=4000)
    assert short.prefill_token > long.prefill_token
    assert long == prices(ServiceRates(), norms, policy, False)  # the unbounded start


def test_the_bound_counts_only_the_uncached_prompt():
    spec = RequestSpec(num_prompt_tokens=1200, max_output_tokens=4, restore_tokens=1070)
    assert spec.uncached_prompt_tokens == 130


def test_the_scheduler_starts_a_restored_turn_from_its_remainder():
    s = scheduler(
        [prefill(4096), mixed(8, 256), decode(8)],
        {prefill(4096): 62.0, mixed(8, 256): 40.0, decode(8): 10.0},
    )
    for _ in range(3):
        s.admit(request(2000))
    s.admit(request(1200, restore_tokens=1070))
    norms = current_normalizers(s.descriptors, s.costs, s.requests.values(), "balanced")
    assert norms.start_rate(130) < norms.start_rate(2000) == norms.token_rate


def test_the_whole_prompt_rule_keeps_the_earlier_start():
    norms = python_normalizers(MEASURED, 4, 0, {}, "whole-prompt")
    assert norms.prompt_starts is None
    assert norms.start_rate(130) == norms.token_rate == math.sqrt(X_GEN * X_NORM)


KINDS = st.sampled_from(
    [prefill(512), prefill(4096), mixed(8, 256), mixed(32, 1024), decode(1), decode(8)]
)


@settings(max_examples=150, deadline=None)
@given(
    graphs=st.lists(st.tuples(KINDS, st.floats(0.5, 90.0)), min_size=1, max_size=6),
    k=st.integers(1, 40),
    prompt=st.integers(1, 5000),
)
def test_the_table_equals_the_definition_over_every_graph(graphs, k, prompt):
    norms = python_normalizers(graphs, k, 0, {}, "balanced")
    assert norms.start_rate(prompt) == newcomer_start(graphs, k, norms, prompt, "balanced")
