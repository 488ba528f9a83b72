"""Issue 10b: the first-delivery credit (``PolicyConfig.first_delivery``). The chunk that
finishes a prompt makes the request's first visible delivery; with the option on it also
earns the delivery price a decoder without delivery history starts at, g / z at the
delivery normalizer (docs/utility.md), and only that chunk earns it."""

from __future__ import annotations

from dataclasses import replace

import pytest
from helios_helpers import decode, prefill, request, scheduler

from ignition.helios import LaneRole, PolicyConfig, SchedulerError
from ignition.helios.decide.service import prices
from ignition.helios.state.rates import Normalizers, ServiceRates

ON = PolicyConfig(first_delivery=1.0)


def test_a_prompt_row_is_priced_the_delivery_a_new_decoder_starts_at_when_the_option_is_on():
    norms = Normalizers(4.0, 0.25, 4.0)
    on = prices(ServiceRates(2.0, None), norms, ON, is_decoder=False)
    newcomer = prices(ServiceRates(2.0, None), norms, ON, is_decoder=True)
    assert on.delivery == pytest.approx(4 / 0.25) == newcomer.delivery
    assert prices(ServiceRates(2.0, None), norms, PolicyConfig(), False).delivery == 0


def _first_prompt_lane(policy: PolicyConfig, prompt: int):
    s = scheduler([prefill(64), decode(4)], policy=policy)
    s.admit(request(prompt=prompt, output=8))
    plan = s.plan()
    assert plan is not None
    (lane,) = [x for x in plan.lanes if x.role is LaneRole.PROMPT]
    return lane


def test_only_the_chunk_finishing_the_prompt_earns_the_first_delivery_credit():
    finishing_off = _first_prompt_lane(PolicyConfig(), 40)
    finishing_on = _first_prompt_lane(ON, 40)
    assert finishing_on.expected_output_tokens == 1
    assert finishing_on.value > finishing_off.value
    partial_off = _first_prompt_lane(PolicyConfig(), 300)
    partial_on = _first_prompt_lane(ON, 300)
    assert partial_on.expected_output_tokens == 0
    assert partial_on.value == partial_off.value


def test_a_negative_first_delivery_weight_is_one_line_naming_the_field():
    with pytest.raises(SchedulerError, match=r"PolicyConfig.first_delivery = -1.0"):
        replace(PolicyConfig(), first_delivery=-1.0)
