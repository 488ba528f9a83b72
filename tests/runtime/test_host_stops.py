"""Host stops require completion feedback (design: "Planning and the execution queue"):
the engine finds stop strings only in published text, so Helios never queues a second
frame for such a request whose tokens the stop would drop. Stop token ids are single
sampled ids, like EOS, and keep the two-frame window."""

from __future__ import annotations

from ignition.runtime.requests.request import GenerationRequest, SamplingParams
from tests.runtime.scripted import make_engine


def _most_queued_frames(**sampling) -> int:
    """Runs one request to its output limit; the most frames that served it at once."""
    engine, _ = make_engine()
    helios = engine.scheduler
    commit, most = helios.commit, [0]

    def counting_commit(plan, fence):
        commit(plan, fence)
        served = sum(1 for f in helios.queue.frames for lane in f.plan.lanes)
        most[0] = max(most[0], served)

    helios.commit = counting_commit
    request = GenerationRequest("a", (1, 2, 3), SamplingParams(max_tokens=24, **sampling))
    engine.submit(request, lambda chunk: None)
    engine.run_until_idle()
    return most[0]


def test_a_request_without_host_stops_may_have_two_decode_frames_queued():
    assert _most_queued_frames(ignore_eos=True) == 2


def test_a_stop_string_request_has_one_frame_at_a_time():
    assert _most_queued_frames(ignore_eos=True, stop=("never",)) == 1


def test_a_stop_token_request_keeps_the_two_frame_window():
    assert _most_queued_frames(ignore_eos=True, stop_token_ids=(99,)) == 2
