"""Issue 13, Helios vision windows (design: "Prerequisites and completion", image paragraph):
image dependencies grouped into whole-image windows bounded by prepared feature storage;
prefill stops before the next window's first dependency, where the consumed state is
snapshotted; a fresh generation restores it and continues. Vision prerequisites (a
request's ``vision_patches``) populate each window before its prefill."""

from __future__ import annotations

from dataclasses import replace

import pytest

from ignition.components.descriptor import Descriptor
from ignition.components.program_kinds import GraphKind
from ignition.helios import Fence, LaneRole, SchedulerError
from ignition.helios.vision_windows import plan_windows, window_spec
from tests.helios.helios_helpers import Driver, decode, prefill, request, scheduler

SNAPSHOT = Descriptor(GraphKind.SNAPSHOT, 1, 0, 1, 1)
RESTORE = Descriptor(GraphKind.RESTORE, 1, 0, 1, 1)
SPANS = ((10, 18), (30, 34), (40, 46))  # 8, 4 and 6 features


def test_images_are_grouped_into_whole_image_windows_bounded_by_the_feature_storage():
    windows = plan_windows(SPANS, 60, feature_capacity=12)
    assert [w.images for w in windows] == [(0, 1), (2,)]
    assert [w.num_features for w in windows] == [12, 6]
    assert all(w.num_features <= 12 for w in windows)


def test_each_window_stops_before_the_next_windows_first_dependency():
    windows = plan_windows(SPANS, 60, feature_capacity=8)
    assert [(w.start, w.stop) for w in windows] == [(0, 30), (30, 40), (40, 60)]


def test_each_windows_features_have_compact_offsets_from_zero():
    windows = plan_windows(SPANS, 60, feature_capacity=12)
    assert [w.feature_offsets for w in windows] == [(0, 8), (0,)]


def test_an_image_larger_than_the_feature_storage_is_an_error():
    with pytest.raises(SchedulerError, match="image 0 has 8 features"):
        plan_windows(SPANS, 60, feature_capacity=6)


def test_unbounded_storage_or_no_images_is_one_window():
    assert len(plan_windows(SPANS, 60, feature_capacity=0)) == 1
    (only,) = plan_windows((), 60, feature_capacity=4)
    assert (only.start, only.stop, only.images) == (0, 60, ())


def test_a_window_stop_must_be_a_capture_end():
    with pytest.raises(SchedulerError, match="window_stop"):
        request(prompt=60, output=4, window_stop=30)


def _windowed():
    costs = {prefill(64): 3.0, decode(1): 2.0, SNAPSHOT: 0.5, RESTORE: 0.5}
    s = scheduler(list(costs), costs)
    base = request(prompt=60, output=4, image_spans=SPANS)
    return s, base, plan_windows(SPANS, 60, feature_capacity=12)


def test_prefill_stops_at_the_window_boundary_and_the_consumed_state_is_snapshotted():
    s, base, windows = _windowed()
    first = s.admit(window_spec(base, windows, 0))
    driver = Driver(s)
    chunk = driver.step()
    assert chunk.kind is GraphKind.PREFILL and chunk.lanes[0].num_prompt_tokens == 40
    capture = driver.step()
    assert capture.kind is GraphKind.SNAPSHOT and capture.lanes[0].checkpoint_tokens == 40
    assert s.requests[first].is_window_held
    assert s.plan() is None  # held: nothing more for this generation


def test_a_fresh_generation_restores_the_boundary_and_prefills_the_next_window():
    s, base, windows = _windowed()
    driver = Driver(s)
    first = s.admit(window_spec(base, windows, 0))
    driver.step()
    driver.step()
    s.cancel(first)  # the runtime rebinds the logical request
    second = s.admit(window_spec(base, windows, 1))
    assert second.slot == first.slot and second.generation > first.generation
    restore = driver.step()
    assert restore.kind is GraphKind.RESTORE
    assert restore.lanes[0].role is LaneRole.RESTORE and restore.lanes[0].checkpoint_tokens == 40
    rest = driver.step()
    assert rest.kind is GraphKind.PREFILL and rest.lanes[0].num_prompt_tokens == 20
    assert driver.step().kind is GraphKind.DECODE  # the last window decodes: no capture


def test_a_window_chunk_never_splits_an_image_span():
    costs = {prefill(16): 1.0, decode(1): 2.0, SNAPSHOT: 0.5, RESTORE: 0.5}
    s = scheduler(list(costs), costs)
    base = request(prompt=60, output=4, image_spans=SPANS)
    windows = plan_windows(SPANS, 60, feature_capacity=12)
    s.admit(window_spec(base, windows, 0))
    driver = Driver(s)
    position = 0
    while (plan := driver.step()) is not None and plan.kind is GraphKind.PREFILL:
        end = position + plan.lanes[0].num_prompt_tokens
        assert not any(a < end < b for a, b in SPANS[:2])
        position = end
    assert position == 40


VISION_SMALL = Descriptor(GraphKind.VISION, 1, 0, 64, 64)
VISION_LARGE = Descriptor(GraphKind.VISION, 1, 0, 256, 256)


def _with_vision(restore_ms: float = 0.5):
    costs = {
        prefill(64): 3.0,
        decode(1): 2.0,
        SNAPSHOT: 0.5,
        RESTORE: restore_ms,
        VISION_SMALL: 0.3,
        VISION_LARGE: 0.6,
    }
    return scheduler(list(costs), costs)


def test_vision_prerequisites_populate_the_window_before_its_prefill():
    s = _with_vision()
    h = s.admit(request(prompt=60, output=4, image_spans=SPANS, vision_patches=32))
    driver = Driver(s)
    vision = driver.step()
    assert vision.kind is GraphKind.VISION
    assert vision.lanes[0].role is LaneRole.VISION and vision.lanes[0].handle == h
    assert s.requests[h].is_vision_ready
    assert driver.step().kind is GraphKind.PREFILL


def test_a_vision_program_too_small_for_the_windows_largest_image_is_never_chosen():
    s = _with_vision()
    s.admit(request(prompt=60, output=4, image_spans=SPANS, vision_patches=100))
    plan = s.plan()
    assert plan.kind is GraphKind.VISION and plan.descriptor.patch_capacity == 256


def test_a_later_windows_generation_restores_before_its_vision_work():
    s = _with_vision()
    windows = plan_windows(SPANS, 60, feature_capacity=12)
    spec = window_spec(request(prompt=60, output=4, image_spans=SPANS), windows, 1)
    s.admit(replace(spec, vision_patches=24))
    driver = Driver(s)
    assert [driver.step().kind for _ in range(3)] == [
        GraphKind.RESTORE,
        GraphKind.VISION,
        GraphKind.PREFILL,
    ]


def test_vision_work_needs_the_request_idle_and_pending():
    s = _with_vision()
    h = s.admit(request(prompt=60, output=4, image_spans=SPANS, vision_patches=32))
    driver = Driver(s)
    plan = s.plan()
    driver.step()  # the vision work ran
    with pytest.raises(SchedulerError, match="no pending vision work"):
        s.commit(
            replace(plan, lanes=(replace(plan.lanes[0], epoch=s.requests[h].epoch),)), Fence(99)
        )


def test_vision_programs_alone_do_not_hold_a_finished_request_for_terminal_retirement():
    costs = {prefill(64): 3.0, decode(1): 2.0, VISION_SMALL: 0.3}
    s = scheduler(list(costs), costs)
    h = s.admit(request(prompt=8, output=1, terminal_snapshot=True))
    driver = Driver(s)
    driver.step()  # the prompt: its one output token finishes the request
    assert h not in s.requests  # released at once: there is no snapshot program to wait for


def _restore_chain_beside_a_decoder(vision_ms: float):
    costs = {prefill(64): 3.0, decode(1): 2.0, SNAPSHOT: 0.5, RESTORE: 0.5, VISION_LARGE: vision_ms}
    s = scheduler(list(costs), costs)
    driver = Driver(s)
    s.admit(request(prompt=4, output=200))
    assert [driver.step().kind for _ in range(3)] == [GraphKind.PREFILL] + [GraphKind.DECODE] * 2
    windows = plan_windows(SPANS, 60, feature_capacity=12)
    spec = window_spec(request(prompt=60, output=4, image_spans=SPANS), windows, 1)
    s.admit(replace(spec, vision_patches=24))
    return s.plan().kind


def test_a_restore_chained_to_vision_work_ranks_by_its_continuation_index():
    """Longer chains use V * T / (T + F): the restore's value arrives only after the vision
    stage and the prefill, so a slow vision stage lets the ready decoder go first, while a
    fast one restores at once (a pair lookahead straight to the prefill ignored it)."""
    assert _restore_chain_beside_a_decoder(vision_ms=0.3) is GraphKind.RESTORE
    assert _restore_chain_beside_a_decoder(vision_ms=30.0) is GraphKind.DECODE
