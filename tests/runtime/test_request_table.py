"""The request table: one state machine per request, named transitions, illegal moves refused."""

from __future__ import annotations

import pytest

from ignition.helios import RequestHandle
from ignition.runtime.requests.request import GenerationRequest, SamplingParams
from ignition.runtime.requests.table import (
    LiveRequest,
    RequestState,
    RequestStateError,
    RequestTable,
)


def _request(request_id: str = "r", max_tokens: int = 8) -> GenerationRequest:
    return GenerationRequest(request_id, (1, 2, 3), SamplingParams(max_tokens=max_tokens))


def _live(request: GenerationRequest, slot: int = 0, generation: int = 1) -> LiveRequest:
    return LiveRequest(request, RequestHandle(slot, generation), lambda _: None, None)  # type: ignore[arg-type]


def _admitted(table: RequestTable, request_id: str = "r") -> LiveRequest:
    request = _request(request_id)
    table.arrive(request, lambda _: None)
    live = _live(request)
    table.admit(live)
    return live


def test_an_arrival_waits_until_admit_makes_it_live():
    table = RequestTable()
    request = _request()
    table.arrive(request, lambda _: None)
    assert table.state_of("r") is RequestState.WAITING
    live = _live(request)
    table.admit(live)
    assert table.state_of("r") is RequestState.LIVE
    assert table.live == {live.handle: live} and not table.waiting


def test_admit_refuses_a_request_that_is_first_in_no_line():
    table = RequestTable()
    table.arrive(_request("first"), lambda _: None)
    with pytest.raises(RequestStateError, match="admit second: not first in any line"):
        table.admit(_live(_request("second")))


def test_restart_takes_a_live_request_to_the_restart_line_and_admit_continues_it():
    table = RequestTable()
    live = _admitted(table)
    table.restart(live, 8)
    assert live.state is RequestState.RESTARTING and live.is_done
    assert list(table.restarting) == [live]
    continued = _live(live.request, slot=1)
    table.admit(continued)
    assert not table.restarting and table.state_of("r") is RequestState.LIVE
    assert table.by_id("r") is continued


def test_preempt_then_resume_then_admit():
    table = RequestTable()
    live = _admitted(table)
    table.preempt(live, 8)
    assert live.state is RequestState.PREEMPTED and live.preempting and not live.is_done
    table.resume(live)
    assert live.state is RequestState.RESUMING and list(table.resuming) == [live]
    assert table.reap(live)  # the old handle frees its slot before the resume
    continued = _live(live.request, slot=0, generation=2)
    table.admit(continued)
    assert table.state_of("r") is RequestState.LIVE and not table.resuming


def test_resume_refuses_a_request_that_was_not_preempted():
    table = RequestTable()
    live = _admitted(table)
    with pytest.raises(RequestStateError, match="resume r: it is live; resume needs preempted"):
        table.resume(live)


def test_finish_then_reap():
    table = RequestTable()
    live = _admitted(table)
    table.finish(live)
    assert live.state is RequestState.FINISHED and live.is_done
    assert table.num_occupied == 1  # its slot is held until reaped
    assert table.reap(live)
    assert live.state is RequestState.REAPED and not table.live
    assert table.state_of("r") is None


def test_finishing_a_restarting_request_takes_it_out_of_its_line():
    table = RequestTable()
    live = _admitted(table)
    table.restart(live, 8)
    table.finish(live)
    assert not table.restarting and live.state is RequestState.FINISHED


def test_reap_refuses_a_live_request():
    table = RequestTable()
    live = _admitted(table)
    with pytest.raises(RequestStateError, match="reap r"):
        table.reap(live)


def test_finish_refuses_a_finished_request():
    table = RequestTable()
    live = _admitted(table)
    table.finish(live)
    with pytest.raises(RequestStateError, match="finish r: it is finished"):
        table.finish(live)


def test_preempt_refuses_a_restarting_request():
    table = RequestTable()
    live = _admitted(table)
    table.restart(live, 8)
    with pytest.raises(RequestStateError, match="preempt r: it is restarting"):
        table.preempt(live, 8)


def test_reaping_a_restarted_handle_keeps_the_request_in_its_line():
    table = RequestTable()
    live = _admitted(table)
    table.restart(live, 8)
    assert table.reap(live)  # it was the request's current handle
    assert table.state_of("r") is RequestState.RESTARTING and table.num_held == 1


def test_close_finishes_every_open_request():
    table = RequestTable()
    waiting = _request("w")
    live = _admitted(table, "a")
    table.arrive(waiting, lambda _: None)
    arrivals, open_requests = table.close()
    assert [r for r, _ in arrivals] == [waiting] and open_requests == [live]
    assert live.state is RequestState.FINISHED and not table.waiting


@pytest.mark.parametrize("leave", ["restart", "preempt"])
def test_leaving_a_handle_carries_the_remaining_output_it_is_given(leave):
    table = RequestTable()
    live = _admitted(table)
    live.output_ids += [4, 5, 6]
    getattr(table, leave)(live, 2)  # Helios's count, not max_tokens less the output (5)
    assert live.remaining_output == 2


def test_rebind_moves_a_live_request_to_its_next_handle():
    table = RequestTable()
    live = _admitted(table)
    table.rebind(live, RequestHandle(0, 2))
    assert table.live == {RequestHandle(0, 2): live} and table.by_id("r") is live


def test_rebind_refuses_a_finished_request():
    table = RequestTable()
    live = _admitted(table)
    table.finish(live)
    with pytest.raises(RequestStateError, match="rebind r"):
        table.rebind(live, RequestHandle(0, 2))
