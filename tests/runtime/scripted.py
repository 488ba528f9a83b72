"""A scripted worker and letter "tokenizer" for engine tests without a model."""

from __future__ import annotations

from collections.abc import Sequence

from ignition.components.capacity import plan_catalog
from ignition.helios import CompletionRecord, ExecutionTiming, LaneRole, Resources, Scheduler
from ignition.recipes import LoadOptions, get_recipe
from ignition.runtime.executors.frames import FrameResult
from ignition.runtime.loop.engine import Engine

EOS = 25  # "z"


class Letters:
    def decode(self, ids: Sequence[int], skip_special_tokens: bool = True) -> str:
        return "".join(chr(97 + i) for i in ids if not (skip_special_tokens and i == EOS))


def successor(token: int) -> int:
    return (token * 7 + 3) % 26


class ScriptedWorker:
    """Keeps each slot's last token on its side, as a device-resident pending token, so
    that a second queued decode frame continues from the first one's output."""

    def __init__(self) -> None:
        self.released = []
        self.frames = []
        self.last: dict = {}

    def launch(self, plan, fence, live):
        records = []
        for lane in plan.lanes:
            request = live[lane.handle]
            if lane.role is LaneRole.PROMPT:
                ids = [successor(request.prompt_ids[-1])] if lane.max_advance_tokens else []
                if ids:
                    self.last[lane.handle] = ids[-1]
                records.append(CompletionRecord(lane.handle, lane.num_prompt_tokens, tuple(ids)))
                continue
            ids, last = [], self.last[lane.handle]
            stops_at_eos = not request.request.sampling.ignore_eos
            for _ in range(min(lane.query_length, lane.max_advance_tokens)):
                last = successor(last)
                ids.append(last)
                if last == EOS and stops_at_eos:
                    break
            self.last[lane.handle] = last
            finished = stops_at_eos and EOS in ids
            records.append(CompletionRecord(lane.handle, 0, tuple(ids), is_finished=finished))
        self.frames.append(plan.descriptor.kind.value)
        return FrameResult(tuple(records), ExecutionTiming(device_ns=1_000_000, wall_ns=1_000_000))

    def wait(self, pending):
        return pending

    def release(self, handle):
        self.released.append(handle)
        self.last.pop(handle, None)

    def carry_history(self, old, new):
        pass  # the scripted model samples without a history


def make_engine(num_slots: int = 4, max_waiting: int = 8, mixed: bool = True):
    catalog = plan_catalog(
        get_recipe("qwen38"), LoadOptions(mixed_prefill=mixed, speculation="off")
    )
    scheduler = Scheduler(catalog, resources=Resources(num_request_slots=num_slots))
    worker = ScriptedWorker()
    engine = Engine(
        scheduler,
        worker,
        Letters(),
        max_context_tokens=4096,
        max_waiting=max_waiting,
    )
    return engine, worker


def expected_tokens(prompt: Sequence[int], n: int, stop_at_eos: bool = True) -> list[int]:
    out, last = [], prompt[-1]
    for _ in range(n):
        last = successor(last)
        out.append(last)
        if stop_at_eos and last == EOS:
            break
    return out
