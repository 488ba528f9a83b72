"""The embedding-readiness contract has a producer: PLE rows delivered through the mailbox.

The seed: "the cost sample subtracts exposed embedding-delivery delay after aggregating the
ranks' intervals ... Service charges and reported throughput use the raw replay and wall
durations." A slow host worker is injected; its delay must show in the frame's readiness
timestamps, in the worker's ExecutionTiming, in Helios's cost sample (subtracted) and not
in the service charge (raw).
"""

from __future__ import annotations

import threading
import time

import pytest
import torch

from ignition.components.program_kinds import GraphKind
from ignition.runtime.assembly import RuntimeOptions, assemble_engine
from ignition.runtime.ple.delivery import FrameDelivery, modulo_row_ids
from ignition.runtime.ple.mailbox import (
    Mailbox,
    Readiness,
    aggregate_exposed_ns,
    frame_exposed_ns,
)
from ignition.runtime.ple.store import open_store
from ignition.runtime.ple.table import write_table
from ignition.runtime.requests.request import GenerationRequest, SamplingParams
from tests.runtime.tiny import EOS, CharDecoder

pytestmark = pytest.mark.usefixtures("reference_kernels")

DELAY_S = 0.02
HEADS, ROWS, WIDTH = 2, 64, 4


class WaitedMailbox(Mailbox):
    """Tells the slow store when the consumer has started waiting."""

    def __init__(self, store, **kwargs) -> None:
        self.waiting = threading.Event()
        super().__init__(store, **kwargs)

    def wait(self, delivery):
        self.waiting.set()
        return super().wait(delivery)


class SlowStore:
    """A host worker that finishes DELAY_S after the rows were needed: a real stall."""

    def __init__(self, inner, mailbox_ref: list) -> None:
        self.inner, self.layout, self.stats = inner, inner.layout, inner.stats
        self.residency = inner.residency
        self._mailbox = mailbox_ref

    def gather(self, row_ids, out) -> None:
        mailbox = self._mailbox[0]
        mailbox.waiting.wait()
        mailbox.waiting.clear()
        time.sleep(DELAY_S)
        self.inner.gather(row_ids, out)


@pytest.fixture
def store(tmp_path):
    layout = write_table(tmp_path, [torch.randn(ROWS, WIDTH)])
    return open_store(layout, "host", torch.device("cpu"))


def slow_mailbox(store) -> WaitedMailbox:
    ref: list = []
    mailbox = WaitedMailbox(SlowStore(store, ref))
    ref.append(mailbox)
    return mailbox


def test_a_slow_host_worker_shows_in_the_readiness_timestamps(store):
    mailbox = slow_mailbox(store)
    delivery = mailbox.publish(torch.tensor([[1, 2], [3, 4]]))
    rows = mailbox.wait(delivery)
    r = delivery.readiness
    assert r.requested_ns <= r.needed_ns < r.ready_ns <= r.consumed_ns
    assert r.exposed_ns == r.ready_ns - r.needed_ns >= DELAY_S * 1e9
    out = torch.empty(2, 2, WIDTH)
    store.gather(torch.tensor([[1, 2], [3, 4]]), out)
    assert torch.equal(rows, out)
    mailbox.close()


def test_rows_staged_before_they_are_needed_expose_nothing(store):
    mailbox = Mailbox(store)
    delivery = mailbox.publish(torch.tensor([5, 6, 7]))
    delivery.done.wait()
    mailbox.wait(delivery)
    assert delivery.readiness.ready_ns <= delivery.readiness.needed_ns
    assert delivery.readiness.exposed_ns == 0
    mailbox.close()


def stalled(needed_ns: int, ready_ns: int) -> Readiness:
    return Readiness(requested_ns=0, ready_ns=ready_ns, needed_ns=needed_ns)


def test_ranks_stalled_at_once_delay_the_frame_once():
    """Not the sum: rank 1's stall lies inside rank 0's."""
    assert aggregate_exposed_ns([[stalled(100, 110)], [stalled(102, 108)]]) == 10


def test_ranks_stalled_one_after_the_other_delay_the_frame_by_both():
    """Not the maximum: rank 0 waits before the program, rank 1 inside it, later."""
    assert aggregate_exposed_ns([[stalled(100, 110)], [stalled(120, 127)]]) == 17


def test_overlapping_stalls_count_their_union():
    assert aggregate_exposed_ns([[stalled(100, 110)], [stalled(105, 115)]]) == 15


def test_one_ranks_stalls_add_and_rows_ready_in_time_count_nothing():
    rank = [stalled(100, 104), stalled(200, 203), stalled(300, 250)]
    assert aggregate_exposed_ns([rank]) == frame_exposed_ns(rank) == 7
    assert aggregate_exposed_ns([]) == aggregate_exposed_ns([[], []]) == 0


def test_staging_buffers_are_reused_not_reallocated(store):
    mailbox = Mailbox(store, num_staging=1)
    first = mailbox.publish(torch.arange(8))
    mailbox.wait(first)
    mailbox.release(first)
    second = mailbox.publish(torch.arange(4))
    mailbox.wait(second)
    assert second.rows.data_ptr() == first.rows.data_ptr()
    mailbox.close()


def test_a_delay_is_subtracted_from_the_cost_sample_and_not_from_the_service_charge(
    model, catalog, store
):
    options = RuntimeOptions(
        num_slots=2, page_size=64, max_context_tokens=512, speculation="off", mixed=False
    )
    engine = assemble_engine(model, catalog, CharDecoder(), [EOS], options)
    mailbox = slow_mailbox(store)
    engine.worker.ple = FrameDelivery(mailbox, modulo_row_ids(HEADS, ROWS), 2, pad_id=EOS)
    scheduler = engine.scheduler
    seen = []
    complete = scheduler.complete

    def spy(fence, report):
        tokens = complete(fence, report)
        charged = {h: p.duration_ms for h, p in scheduler._publishable.items()}
        seen.append((report.timing, charged))
        return tokens

    scheduler.complete = spy
    frames = []
    engine.frame_listeners.append(lambda plan, result: frames.append((plan, result)))
    sampling = SamplingParams(max_tokens=2, temperature=0.0, ignore_eos=True)
    engine.submit(GenerationRequest("r", tuple(range(4, 24)), sampling), lambda chunk: None)
    engine.run_until_idle(max_steps=200)
    mailbox.close()

    # the prompt's rows, and the pending token's once its frame was read, were delivered
    delivered = [(p, r) for p, r in frames if r.readiness]
    prefill = [(p, r) for p, r in delivered if p.descriptor.kind is GraphKind.PREFILL]
    assert len(prefill) == 1
    plan, result = prefill[0]
    timing = result.timing
    (readiness,) = result.readiness
    assert isinstance(readiness, Readiness)
    # the stall is in the frame's timestamps and the worker reports exactly that
    assert readiness.exposed_ns >= DELAY_S * 1e9
    assert timing.readiness_stall_ns == readiness.exposed_ns
    assert timing.device_ns > timing.readiness_stall_ns  # the interval holds the wait
    # cost sample: the raw interval less the stall (the first sample is the estimate)
    assert scheduler.costs.entry(plan.descriptor).estimate_ns == (
        timing.device_ns - timing.readiness_stall_ns
    )
    # service charge: the raw interval, stall included
    charged = next(c for t, c in seen if t == timing)
    (charged_ms,) = charged.values()
    raw_ns = {timing.device_ns, max(timing.device_ns, timing.wall_ns)}
    assert round(charged_ms * 1e6) in raw_ns
    assert charged_ms * 1e6 >= timing.device_ns
    assert store.stats.snapshot().frames == len(delivered)


def generate(model, catalog, delivery_for=None) -> dict[str, list[int]]:
    options = RuntimeOptions(
        num_slots=4, page_size=64, max_context_tokens=512, speculation="off", mixed=True
    )
    engine = assemble_engine(model, catalog, CharDecoder(), [EOS], options)
    if delivery_for is not None:
        engine.worker.ple = delivery_for()
    prompts = {"a": list(range(4, 40)), "b": [(5 * i + 1) % 100 + 4 for i in range(70)]}
    outputs: dict[str, list[int]] = {name: [] for name in prompts}
    for name, prompt in prompts.items():
        sampling = SamplingParams(max_tokens=6, temperature=0.0, ignore_eos=True)
        sink = lambda chunk, name=name: outputs[name].extend(chunk.token_ids)  # noqa: E731
        engine.submit(GenerationRequest(name, tuple(prompt), sampling), sink)
    engine.run_until_idle(max_steps=500)
    if delivery_for is not None:
        engine.worker.ple.mailbox.close()
    return outputs


@pytest.mark.parametrize("residency", ["device", "host", "disk"])
def test_delivering_rows_through_the_mailbox_leaves_greedy_output_unchanged(
    model, catalog, tmp_path, residency
):
    layout = write_table(tmp_path, [torch.randn(ROWS, WIDTH)])
    device = torch.device("cpu")

    stores = []

    def delivery():
        stores.append(open_store(layout, residency, device, cache_bytes=8 * WIDTH * 4))
        return FrameDelivery(Mailbox(stores[0]), modulo_row_ids(HEADS, ROWS), 2, pad_id=EOS)

    assert generate(model, catalog, delivery) == generate(model, catalog)
    assert stores[0].stats.snapshot().frames >= 2  # every prompt chunk's rows were delivered


def test_a_frame_that_fails_before_it_runs_hands_its_staging_back(model, catalog, store):
    options = RuntimeOptions(
        num_slots=2, page_size=64, max_context_tokens=512, speculation="off", mixed=False
    )
    engine = assemble_engine(model, catalog, CharDecoder(), [EOS], options)
    mailbox = Mailbox(store, num_staging=1)
    engine.worker.ple = FrameDelivery(mailbox, modulo_row_ids(HEADS, ROWS), 2, pad_id=EOS)
    failures = iter([RuntimeError("injected")])

    def prompt_job(plan, live):
        if (err := next(failures, None)) is not None:
            raise err
        return None

    engine.worker.executors[GraphKind.PREFILL].prompt_job = prompt_job
    done = []
    sampling = SamplingParams(max_tokens=2, temperature=0.0, ignore_eos=True)
    engine.submit(GenerationRequest("r", tuple(range(4, 24)), sampling), done.append)
    engine.submit(GenerationRequest("s", tuple(range(5, 25)), sampling), done.append)
    engine.run_until_idle(max_steps=200)
    mailbox.close()
    # the one staging buffer came back: a later frame published and completed through it
    assert store.stats.snapshot().frames >= 1
