"""Service prices and accounting (docs/utility.md)."""

from __future__ import annotations

import math

import pytest
from helios_helpers import MS, Driver, decode, prefill, records_for, request, scheduler

from ignition.helios import CompletionReport, ExecutionTiming, Fence, PolicyConfig, SchedulerError
from ignition.helios.decide.service import prices, reference_interval_ms, token_normalizer
from ignition.helios.state.rates import Normalizers, ServiceRates, advance_rates


def test_prices_are_the_utility_gradient():
    policy = PolicyConfig()
    p = prices(ServiceRates(2.0, 0.5), Normalizers(1.0, 1.0, 1.0), policy, is_decoder=True)
    assert p.prefill_token == pytest.approx(1 + 16 / 2.0)
    assert p.output_token == pytest.approx(64 + 16 / 2.0)
    assert p.delivery == pytest.approx(4 / 0.5)


def test_only_decoders_have_a_delivery_price():
    p = prices(ServiceRates(2.0, 0.5), Normalizers(1.0, 1.0, 1.0), PolicyConfig(), False)
    assert p.delivery == 0


def test_missing_history_starts_at_the_normalizers():
    p = prices(ServiceRates(), Normalizers(4.0, 0.25, 4.0), PolicyConfig(), is_decoder=True)
    assert p.prefill_token == pytest.approx(1 + 16 / 4.0)
    assert p.delivery == pytest.approx(4 / 0.25)


def test_rates_are_floored_so_a_price_stays_finite():
    p = prices(ServiceRates(0.0, 0.0), Normalizers(2.0, 1.0, 1.0), PolicyConfig(), True)
    assert math.isfinite(p.output_token) and p.output_token == pytest.approx(64 + 16 / 2e-9)


def test_an_unserved_interval_grows_the_price_geometrically():
    norms = Normalizers(1.0, 1.0, 1.0)
    rates = ServiceRates(1.0, None)
    after = advance_rates(
        rates,
        duration_ms=10.0,
        tokens=0,
        deliveries=0,
        norms=norms,
        is_decoder=False,
        adaptation_ms=100.0,
    )
    assert 1 / after.token_rate == pytest.approx(math.exp(10.0 / 100.0))


def test_sigma_uses_the_fastest_batch_feasible_graph():
    measured = [(decode(1), 2.0), (decode(4), 4.0), (decode(8), 10.0)]
    # K = 4: per-stream intervals 2/1, 4/4, 10/4 -> decode(4) wins; sigma = 4 * 1.0
    assert reference_interval_ms(measured, 4) == pytest.approx(4.0)


def test_prefill_graphs_do_not_enter_sigma():
    assert reference_interval_ms([(prefill(64), 1.0)], 2) is None


def test_token_normalizer_is_the_best_shared_per_stream_rate():
    measured = [(prefill(64), 2.0), (decode(4), 1.0)]
    # K = 2: prefill 64 / (2 * 2) = 16 tokens/ms; decode 2 / (2 * 1) = 1
    assert token_normalizer(measured, 2) == pytest.approx(16.0)


def _one_decoder():
    s = scheduler([prefill(64), decode(1), decode(2)])
    h = s.admit(request(64))
    driver = Driver(s)
    driver.step()
    return s, h, driver


def test_prices_survive_the_prefill_to_decode_transition():
    s, h, _ = _one_decoder()
    before = (s.requests[h].rates.token_rate, s.requests[h].rates.delivery_rate)
    s.admit(request(64))  # a normalizer change
    assert (s.requests[h].rates.token_rate, s.requests[h].rates.delivery_rate) == before


def test_completion_records_zero_deliveries_and_publication_makes_it_one():
    s, h, driver = _one_decoder()
    s.requests[h].rates.delivery_rate = 0.5
    plan = s.plan()
    s.commit(plan, Fence(10))
    s.advance_to(driver.now + plan.estimated_duration_ns)
    s.complete(
        Fence(10), CompletionReport(records_for(plan), ExecutionTiming(plan.estimated_duration_ns))
    )
    t = plan.estimated_duration_ns / MS
    a = math.exp(-t / 100.0)
    assert s.requests[h].rates.delivery_rate == pytest.approx(a * 0.5)
    s.published_output(h, Fence(10))
    assert s.requests[h].rates.delivery_rate == pytest.approx(a * 0.5 + (1 - a) / t)
    s.published_output(h, Fence(10))  # later tokens of the burst change nothing
    assert s.requests[h].rates.delivery_rate == pytest.approx(a * 0.5 + (1 - a) / t)


def test_a_first_published_burst_sets_the_delivery_rate_from_its_frame():
    s = scheduler([prefill(64), decode(1)])
    h = s.admit(request(64))
    plan = s.plan()
    s.commit(plan, Fence(1))
    s.advance_to(plan.estimated_duration_ns)
    s.complete(
        Fence(1), CompletionReport(records_for(plan), ExecutionTiming(plan.estimated_duration_ns))
    )
    s.published_output(h, Fence(1))
    assert s.requests[h].rates.delivery_rate == pytest.approx(MS / plan.estimated_duration_ns)


def test_publication_must_match_the_last_completion():
    s, h, _ = _one_decoder()
    with pytest.raises(SchedulerError, match="no pending publication"):
        s.published_output(h, Fence(42))


def test_unselected_participants_receive_zero_service():
    s = scheduler([prefill(64), decode(1)])
    first = s.admit(request(64))
    waiting = s.admit(request(64))
    driver = Driver(s)
    plan = driver.step()
    served = plan.lanes[0].handle
    other = waiting if served == first else first
    assert s.requests[served].rates.token_rate > s.requests[other].rates.token_rate


def test_isolated_frames_charge_the_larger_of_device_and_wall_time():
    s = scheduler([prefill(64), decode(1)])
    h = s.admit(request(64))
    plan = s.plan()
    s.commit(plan, Fence(1))
    s.complete(
        Fence(1), CompletionReport(records_for(plan), ExecutionTiming(device_ns=MS, wall_ns=4 * MS))
    )
    s.published_output(h, Fence(1))
    assert s.requests[h].rates.delivery_rate == pytest.approx(1 / 4.0)


def test_a_cancelled_handle_never_charges_a_request_reusing_its_slot():
    from ignition.helios import Resources

    s = scheduler([prefill(64), decode(1)], resources=Resources(num_request_slots=1))
    h = s.admit(request(64))
    plan = s.plan()
    s.commit(plan, Fence(1))
    s.cancel(h)
    tokens = s.complete(Fence(1), CompletionReport(records_for(plan), ExecutionTiming(MS, MS)))
    assert tokens == []
    reused = s.admit(request(64))
    assert reused.slot == h.slot
    assert s.requests[reused].rates.token_rate is None


def test_a_frame_without_a_device_interval_publishes_without_service_history():
    s, h, _ = _one_decoder()
    before = (s.requests[h].rates.token_rate, s.requests[h].rates.delivery_rate)
    plan = s.plan()
    s.commit(plan, Fence(10))
    s.complete(
        Fence(10), CompletionReport(records_for(plan), ExecutionTiming(device_ns=0, wall_ns=MS))
    )
    s.published_output(h, Fence(10))
    assert (s.requests[h].rates.token_rate, s.requests[h].rates.delivery_rate) == before
    assert s.requests[h].last_output_ns == s.now_ns
