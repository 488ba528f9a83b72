"""Issue 14: the projection and table caches behind a fast plan() serve only what a fresh
decision would build (the differential test checks whole plans; these check the caches'
invalidation directly)."""

from __future__ import annotations

from helios_helpers import Driver, decode, prefill, request, scheduler

from ignition.helios.fast.projection import build_population


def _decoding(num_decoders: int):
    s = scheduler([prefill(64), decode(4)])
    handles = [s.admit(request(64)) for _ in range(num_decoders)]
    driver = Driver(s)
    while not all(s.requests[h].is_decoder for h in handles):
        driver.step()
    return s, handles


def _population(s, cache=None):
    start_ns = s.queue.expected_end_ns(s.now_ns)
    return build_population(
        s.requests, s.queue, s.descriptors, s.costs, s.policy, start_ns, s._max_depth, cache
    )


def test_an_unchanged_request_keeps_its_view_between_decisions():
    s, _ = _decoding(3)
    first, _ = _population(s, s.selector._projection)
    again, _ = _population(s, s.selector._projection)
    assert all(a is b for a, b in zip(first.decoders, again.decoders, strict=True))


def test_a_view_is_rebuilt_when_its_stored_rates_change_between_decisions():
    s, handles = _decoding(3)
    _population(s, s.selector._projection)
    s.requests[handles[1]].rates.token_rate = 1e-3  # a caller adjusting state directly
    cached, _ = _population(s, s.selector._projection)
    fresh, _ = _population(s)
    assert [v.prices for v in cached.decoders] == [v.prices for v in fresh.decoders]


def test_views_age_with_the_clock_though_their_request_is_unchanged():
    s, _ = _decoding(2)
    before, _ = _population(s, s.selector._projection)
    s.advance_to(s.now_ns + 5_000_000)
    after, _ = _population(s, s.selector._projection)
    fresh, _ = _population(s)
    assert [v.age_ms for v in after.decoders] == [v.age_ms for v in fresh.decoders]
    assert [v.age_ms for v in after.decoders] != [v.age_ms for v in before.decoders]


def test_the_last_tables_are_reused_only_for_the_same_views():
    s, _ = _decoding(3)
    s.plan()
    tables = s.selector._tables._last[3]
    s.plan()
    assert s.selector._tables._last[3] is tables
    s.admit(request(64))  # a new prompt row: new views, new tables
    s.plan()
    assert s.selector._tables._last[3] is not tables
