"""How a request ends or continues: the moves the engine, publication and preemption share."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping

from ignition.helios import (
    LaneRole,
    RequestHandle,
    ScheduledPlan,
    SchedulerError,
    SchedulerProtocol,
)
from ignition.runtime.loop.retention_hooks import RetentionHooks
from ignition.runtime.loop.stats import EngineStats
from ignition.runtime.requests.request import StreamChunk
from ignition.runtime.requests.table import LiveRequest, RequestStateError, RequestTable, Sink

log = logging.getLogger("ignition.engine")


def deliver(sink: Sink, chunk: StreamChunk) -> None:
    """A sink that raises (its client is gone) must not take the loop down."""
    try:
        sink(chunk)
    except Exception as err:
        log.warning("dropped a chunk for a closed stream: %s: %s", type(err).__name__, err)


def retired_in(
    plan: ScheduledPlan, live: Mapping[RequestHandle, LiveRequest]
) -> Iterator[LiveRequest]:
    """The live requests whose terminal snapshot ``plan`` just completed."""
    for lane in plan.lanes:
        if lane.role is LaneRole.TERMINAL and lane.handle in live:
            yield live[lane.handle]


class Lifecycle:
    def __init__(
        self,
        table: RequestTable,
        scheduler: SchedulerProtocol,
        retention: RetentionHooks,
        stats: EngineStats,
        clock_ns: Callable[[], int],
    ) -> None:
        self.table = table
        self.scheduler = scheduler
        self.retention = retention
        self.stats = stats
        self.clock_ns = clock_ns
        self._start_ns = clock_ns()

    def now_ns(self) -> int:
        """The scheduler's clock: nanoseconds since the engine started."""
        return self.clock_ns() - self._start_ns

    def finish(
        self,
        live: LiveRequest,
        reason: str,
        notify_scheduler: bool,
        error: str | None = None,
        stop_reason: int | str | None = None,
    ) -> None:
        self.table.finish(live)
        if notify_scheduler:
            self.cancel_in_scheduler(live.handle)
            self.retention.cancel(live.request)
        else:
            self.retention.drop_terminal(live)
        self.stats.record_finished(reason)
        self._record_phases(live)
        chunk = StreamChunk(
            "",
            (),
            len(live.request.prompt_ids),
            len(live.output_ids),
            reason,
            error,
            stop_reason=stop_reason,
            num_cached_tokens=live.num_cached_tokens,
        )
        deliver(live.sink, chunk)

    def end_unadmitted(
        self, sink: Sink, num_prompt: int, num_output: int, reason: str, error: str | None = None
    ) -> None:
        """A request without a live handle ends: counted and told, nothing else."""
        self.stats.record_finished(reason)
        deliver(sink, StreamChunk("", (), num_prompt, num_output, reason, error))

    def _record_phases(self, live: LiveRequest) -> None:
        now = self.clock_ns()
        first = live.first_token_ns
        self.stats.record_phases(
            (live.admitted_ns - live.arrival_ns) / 1e9,
            ((first if first is not None else now) - live.admitted_ns) / 1e9,
            (now - first) / 1e9 if first is not None else None,
        )

    def cancel_in_scheduler(self, handle: RequestHandle) -> None:
        """Stop selection; a request Helios already finished needs nothing more."""
        try:
            self.scheduler.cancel(handle)
        except SchedulerError as err:
            log.debug("cancel %s: %s", handle, err)

    def remaining_output(self, live: LiveRequest) -> int:
        """Helios's remaining output for ``live``, read through its view while the handle
        is still held (a restart or preemption carries it to the readmission)."""
        view = self.scheduler.request(live.handle)
        if view is None:
            raise RequestStateError(
                f"{live.request.request_id}: the scheduler no longer holds {live.handle}"
            )
        return view.remaining_output

    def continuation(self, old: LiveRequest, handle: RequestHandle) -> LiveRequest:
        """``old`` continued under a new handle, its output so far replayed as prompt."""
        replay = tuple(old.output_ids)
        live = LiveRequest(
            old.request,
            handle,
            old.sink,
            old.detokenizer,
            output_ids=list(replay),
            replay_ids=replay,
            num_restarts=old.num_restarts,
            arrival_ns=old.arrival_ns,
            admitted_ns=old.admitted_ns,
            first_token_ns=old.first_token_ns,
        )
        live.num_cached_tokens = old.num_cached_tokens  # usage reports prompt tokens only
        # The client has (or will get) the prompt logprobs once; a replay rescores the same
        # positions, which changes nothing.
        live.prompt_scores, live.prompt_scores_sent = old.prompt_scores, old.prompt_scores_sent
        return live

    def abort(self, request_id: str) -> bool:
        """The client left: end the request wherever it is; True when it was waiting."""
        table = self.table
        waiting = table.drop_waiting(request_id)
        if waiting is not None:
            request, sink = waiting
            self.end_unadmitted(sink, len(request.prompt_ids), 0, "abort")
            return True
        for old in table.restarting:
            if old.request.request_id == request_id:
                table.finish(old)
                n, m = len(old.request.prompt_ids), len(old.output_ids)
                self.end_unadmitted(old.sink, n, m, "abort")
                return False
        for old in table.resuming:  # a client left while its request waited to resume
            if old.request.request_id == request_id:
                self.finish(old, "abort", notify_scheduler=False)
                return False
        live = table.by_id(request_id)
        if live is not None and not live.is_done:
            self.finish(live, "abort", notify_scheduler=True)
        return False

    def report_usage(self, num_slots: int) -> None:
        """Queue and pool gauges for /metrics, once per turn."""
        table = self.table
        running = preempting = 0
        for live in table.live.values():
            if live.preempting:
                preempting += 1
            elif not live.is_done:
                running += 1
        waiting = len(table.waiting) + len(table.restarting)
        self.stats.set_queue(running, waiting, len(table.resuming) + preempting)
        usage = self.scheduler.usage()
        if usage.num_pages > 0:  # a scheduler with a page ledger (Helios)
            used = max(0, usage.num_pages - usage.num_free_pages)
            self.stats.set_usage(table.num_occupied, num_slots, used, usage.num_pages)
