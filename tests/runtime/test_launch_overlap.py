"""Non-blocking launch (issue 16): the engine plans and queues the next frame while one runs.

``launch`` enqueues a frame and returns; ``wait`` is where the device interval is read. On
CPU the eager run happens inside ``launch``, so what these tests pin is the order the
engine drives: a frame is launched, the next one is planned and launched, and only then is
the first one waited for. On CUDA the same order puts host planning behind device work.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest
import torch

from ignition.compiler import graph
from ignition.components.capacity import plan_catalog
from ignition.kernels import use_backend
from ignition.model.config import ModelConfig
from ignition.model.weights import random_model
from ignition.recipes import LoadOptions, get_recipe
from ignition.runtime.assembly import RuntimeOptions, assemble_engine
from ignition.runtime.requests.request import GenerationRequest, SamplingParams


class Chars:
    def decode(self, ids: Sequence[int], skip_special_tokens: bool = True) -> str:
        return "".join(chr(0x4E00 + i) for i in ids)


@pytest.fixture(scope="module")
def engine_parts():
    model = random_model(ModelConfig.tiny(), seed=5)
    catalog = plan_catalog(get_recipe("qwen38"), LoadOptions(max_prefill_chunk=64))
    return model, catalog


def _traced_engine(engine_parts, speculation: str):
    model, catalog = engine_parts
    options = RuntimeOptions(
        num_slots=2, page_size=64, max_context_tokens=256, speculation=speculation, mixed=False
    )
    with use_backend("reference"):
        engine = assemble_engine(model, catalog, Chars(), [], options)
    events: list[tuple[str, int]] = []
    worker, scheduler = engine.worker, engine.scheduler
    launch, wait, plan = worker.launch, worker.wait, scheduler.plan

    def traced_launch(p, fence, live):
        events.append(("launch", fence.value))
        return launch(p, fence, live)

    def traced_wait(pending):
        events.append(("wait", pending.fence.value))
        return wait(pending)

    def traced_plan():
        chosen = plan()
        if chosen is not None:
            events.append(("plan", -1))
        return chosen

    worker.launch, worker.wait, scheduler.plan = traced_launch, traced_wait, traced_plan
    return engine, events


def _run(engine, num_tokens: int = 10) -> None:
    """Generate greedily; the request must end by length (a failed frame ends it "error")."""
    finished = []
    sampling = SamplingParams(max_tokens=num_tokens, temperature=0.0, ignore_eos=True)
    request = GenerationRequest("r", (5, 9, 11, 17, 23), sampling)
    engine.submit(request, lambda chunk: finished.append((chunk.finish_reason, chunk.error)))
    with use_backend("reference"):
        engine.run_until_idle(max_steps=500)
    assert [f for f in finished if f[0]] == [("length", None)]


def test_the_engine_plans_the_next_frame_between_launch_and_wait(engine_parts):
    engine, events = _traced_engine(engine_parts, "off")
    _run(engine)
    launched_at = {fence: i for i, (kind, fence) in enumerate(events) if kind == "launch"}
    waited_at = {fence: i for i, (kind, fence) in enumerate(events) if kind == "wait"}
    overlapped = [
        fence
        for fence, start in launched_at.items()
        if any(k == "plan" for k, _ in events[start + 1 : waited_at[fence]])
        and any(k == "launch" for k, _ in events[start + 1 : waited_at[fence]])
    ]
    # In steady decode the two-slot queue fills: a frame's successor is planned and launched
    # before the frame is waited for (how often is Helios's choice; that it happens is ours).
    assert overlapped
    assert all(launched_at[f] < waited_at[f] for f in launched_at)


def test_launch_does_not_wait_and_wait_reads_the_device_interval(engine_parts, monkeypatch):
    engine, _ = _traced_engine(engine_parts, "off")
    waits: list[int] = []
    original = graph.InflightRun.wait

    def wait(self):
        waits.append(1)
        return original(self)

    monkeypatch.setattr(graph.InflightRun, "wait", wait)
    durations: list[int] = []
    engine.frame_listeners.append(lambda plan, result: durations.append(result.timing.device_ns))
    _run(engine, num_tokens=4)
    assert len(waits) == len(durations) > 0  # one device-interval read per frame, in wait
    assert all(ns > 0 for ns in durations)


def test_a_frame_uploads_each_bound_buffer_once(engine_parts):
    engine, _ = _traced_engine(engine_parts, "off")
    program, _ = next(iter(engine.worker.programs.values()))
    staging = program.staging
    counts: list[int] = []
    original = staging.upload

    def upload(frame):
        before = staging.num_uploads
        changed_mirrors = sum(m.is_dirty for m in staging.mirrors.values())
        original(frame)
        counts.append(staging.num_uploads - before)
        # One copy per bound buffer, plus the page table when this frame's binding grew it.
        assert staging.num_uploads - before == len(frame.uploads) + changed_mirrors
        assert len({name for name, _ in frame.uploads}) == len(frame.uploads)

    staging.upload = upload
    _run(engine, num_tokens=4)
    assert counts and max(counts) <= len(staging.workspace.buffers) + len(staging.mirrors)


def test_binding_and_launching_a_frame_never_reads_the_device(engine_parts):
    from ignition.compiler.host_sync import HostSyncDetector

    engine, _ = _traced_engine(engine_parts, "off")
    worker = engine.worker
    launch = worker.launch

    def detected_launch(plan, fence, live):
        with HostSyncDetector(f"launch {plan.descriptor.name}"), torch.no_grad():
            return launch(plan, fence, live)

    worker.launch = detected_launch
    _run(engine, num_tokens=4)


def test_page_table_growth_reaches_the_device_through_the_staged_upload(engine_parts):
    engine, _ = _traced_engine(engine_parts, "off")
    state = engine.worker.state
    mirror = engine.worker.resources.page_table
    assert mirror is not None
    _run(engine, num_tokens=4)
    assert (state.page_table.numpy() == mirror.array).all()
    assert (mirror.array[0] >= 0).any()  # slot 0 received pages
