"""Request resources belong to the scheduler: when nothing is in flight and a commit
cannot get its KV pages, Helios names who gives way (the latest admitted among the
holders and the requests the blocked plan serves), and says when a preempted request
fits to resume. The direct scheduler keeps no page ledger and names no victim."""

from __future__ import annotations

from helios_helpers import Driver, decode, prefill, request, scheduler

from ignition.direct.scheduler import DirectScheduler
from ignition.helios import PreemptionVictim, Resources

SMALL_POOL = Resources(4, num_pages=8, page_size_tokens=16)


def _two_holders_out_of_pages(first_ns: int = 10, second_ns: int = 20):
    s = scheduler([prefill(64), decode(4)], resources=SMALL_POOL)
    a = s.admit(request(40, 1000, admitted_ns=first_ns))
    b = s.admit(request(40, 1000, admitted_ns=second_ns))
    Driver(s).run_until_out_of_pages()
    return s, a, b


def test_a_requests_view_carries_its_output_limit_less_the_output_it_committed():
    """The runtime readmits a preempted or restarted request with this count (its one owner)."""
    s = scheduler([prefill(64), decode(4)], resources=SMALL_POOL)
    handle = s.admit(request(40, 30))
    assert s.request(handle).remaining_output == 30
    driver, generated = Driver(s), 0
    for _ in range(6):  # its prefill, then decode steps, each lane's every token accepted
        generated += sum(lane.max_advance_tokens for lane in driver.step().lanes)
    assert generated > 1 and s.request(handle).remaining_output == 30 - generated


def test_the_latest_admitted_holder_gives_way():
    s, _, b = _two_holders_out_of_pages()
    assert s.preemption_victim(s.plan()) == PreemptionVictim(b, holds_pages=True)


def test_admission_time_not_slot_order_names_the_victim():
    """A resumed request keeps its first admission time: the older one stays."""
    s, a, _ = _two_holders_out_of_pages(first_ns=30, second_ns=20)
    assert s.preemption_victim(s.plan()) == PreemptionVictim(a, holds_pages=True)


def test_a_newer_blocked_request_without_pages_is_deferred_not_an_older_holder():
    s, _, _ = _two_holders_out_of_pages()
    c = s.admit(request(40, 1000, admitted_ns=30))
    blocked = s.plan()
    assert [lane.handle for lane in blocked.lanes] == [c]
    assert s.preemption_victim(blocked) == PreemptionVictim(c, holds_pages=False)


def test_a_lone_request_the_pool_cannot_hold_has_no_victim():
    s = scheduler([prefill(64), decode(4)], resources=Resources(4, 2, 16))
    s.admit(request(40, 1000))
    assert s.preemption_victim(s.plan()) is None


def _one_decoder():
    s = scheduler([prefill(64), decode(4)], resources=SMALL_POOL)
    s.admit(request(40, 1000))
    Driver(s).step()  # its prefill: it now holds pages and decodes
    return s, s.usage().num_free_pages


def test_a_resume_leaves_a_page_of_growth_for_each_running_holder():
    s, free = _one_decoder()
    assert s.can_resume((free - 1) * 16 - 11, 10)  # free - 1 pages for its whole length
    assert not s.can_resume(free * 16 - 11, 10)  # every free page: none left to grow


def test_a_resume_waits_for_the_pages_admitted_requests_without_pages_will_take():
    s, _ = _one_decoder()
    assert s.can_resume(16 - 11, 10)
    s.admit(request(40, 1000))  # admitted, no pages yet: it will take 66
    assert not s.can_resume(16 - 11, 10)


def test_a_resume_into_an_empty_scheduler_always_fits():
    s = scheduler([prefill(64), decode(4)], resources=SMALL_POOL)
    assert s.can_resume(1000, 1000)


def test_the_direct_scheduler_keeps_no_page_ledger_and_names_no_victim():
    catalog = scheduler([prefill(64), decode(1)]).catalog
    direct = DirectScheduler(catalog, Resources(2))
    handle = direct.admit(request(64, 4))
    assert direct.usage().num_pages == 0
    assert direct.preemption_victim(direct.plan()) is None
    assert not direct.can_resume(64, 4)
    assert direct.request(handle).is_live and direct.can_admit()
    assert direct.request(handle).remaining_output == 4
