"""The loop's hook points: each point calls, in order, only the hooks that implement it, and
the engine calls each at its moment of the turn."""

from __future__ import annotations

from ignition.runtime.loop.hooks import FaultHook, LoopHook, LoopHooks
from ignition.runtime.requests.request import GenerationRequest, SamplingParams
from tests.runtime.scripted import make_engine


class Launches(LoopHook):
    def __init__(self, seen: list, name: str) -> None:
        self.seen, self.name = seen, name

    def before_launch(self, plan, live) -> None:
        self.seen.append(self.name)


def test_a_point_calls_the_hooks_that_implement_it_in_order():
    seen: list = []
    hooks = LoopHooks([Launches(seen, "a"), LoopHook(), Launches(seen, "b")])
    for before_launch in hooks.before_launch:
        before_launch(None, {})
    assert seen == ["a", "b"]


def test_a_hook_that_keeps_the_default_is_left_out_of_that_point():
    hooks = LoopHooks([Launches([], "a")])
    assert hooks.on_step == [] and hooks.before_publish == [] and len(hooks.before_launch) == 1


def test_replace_swaps_the_hooks_of_one_kind():
    checks: list = []
    hooks = LoopHooks([Launches([], "a")])
    hooks.replace(FaultHook, FaultHook(lambda stage, live: checks.append(stage)))
    hooks.replace(FaultHook, FaultHook(lambda stage, live: checks.append("second " + stage)))
    for before_publish in hooks.before_publish:
        before_publish(None)
    assert checks == ["second publish"]
    hooks.replace(FaultHook, None)
    assert hooks.before_publish == [] and len(hooks.before_launch) == 1


class Moments(LoopHook):
    """Records each request's output length at the two completion points."""

    def __init__(self) -> None:
        self.seen: list = []
        self.workers: list = []

    def after_complete(self, plan, loop) -> None:
        self.seen.append(("complete", [len(r.output_ids) for r in loop.table.live.values()]))
        self.workers.append(loop.worker)

    def after_publish(self, plan, live) -> None:
        self.seen.append(("publish", [len(r.output_ids) for r in live.values()]))


def _serve_one(engine, max_tokens: int) -> None:
    request = GenerationRequest("a", (1, 2, 3), SamplingParams(max_tokens=max_tokens))
    engine.submit(request, lambda chunk: None)
    engine.run_until_idle()


def test_after_complete_precedes_a_frames_publication_and_after_publish_follows_it():
    engine, _ = make_engine()
    moments = Moments()
    engine.hooks.replace(Moments, moments)
    _serve_one(engine, max_tokens=3)
    assert moments.seen == [
        ("complete", [0]),
        ("publish", [1]),
        ("complete", [1]),
        ("publish", [2]),
        ("complete", [2]),
        ("publish", [3]),
    ]


def test_after_complete_is_lent_the_worker_the_engine_has_at_the_call():
    engine, worker = make_engine()
    moments = Moments()
    engine.hooks.replace(Moments, moments)
    engine.worker = Wrapped(worker)  # as fault injection wraps it after assembly
    _serve_one(engine, max_tokens=2)
    assert moments.workers and all(w is engine.worker for w in moments.workers)


class Wrapped:
    def __init__(self, inner) -> None:
        self.inner = inner

    def __getattr__(self, name: str):
        return getattr(self.inner, name)
