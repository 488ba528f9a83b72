"""The loop's hook points: each point calls, in order, only the hooks that implement it."""

from __future__ import annotations

from ignition.runtime.loop_hooks import FaultHook, LoopHook, LoopHooks


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
