"""Host cost of binding one frame's inputs in ``ModelWorker.launch`` (a benchmark).

The program itself is stubbed out (its static outputs are returned as they are), so the
time is what the host spends per frame before the device could start: role checks,
writing rows, and getting them to the device. Prints microseconds per launch for a decode
frame of 4 rows and a mixed frame (a 512-token prompt chunk beside 3 decoders).

    .venv/bin/python benchmarks/launch_binding.py [--repeats 2000]

Run it under an older ignition (``PYTHONPATH=<old checkout>``) for the before numbers.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from ignition.compiler.graph import prepare_programs
from ignition.components.capacity import plan_catalog
from ignition.helios import Fence, LaneRole, LaneWork, RequestHandle, ScheduledPlan, SelectionReason
from ignition.kernels import use_backend
from ignition.model.config import ModelConfig
from ignition.model.state import ModelState
from ignition.model.weights import random_model
from ignition.recipes import LoadOptions, get_recipe
from ignition.runtime.executors.resources import SlotResources
from ignition.runtime.executors.worker import ModelWorker
from ignition.runtime.requests.detokenize import IncrementalDetokenizer
from ignition.runtime.requests.request import GenerationRequest, SamplingParams
from ignition.runtime.requests.table import LiveRequest


class Chars:
    def decode(self, ids, skip_special_tokens=True):
        return "".join(chr(65 + i % 26) for i in ids)


def prompt_cursor(worker: ModelWorker) -> dict:
    """The worker's prompt cursors (on the executors' ledger since issue 26)."""
    context = getattr(worker, "context", None)
    return worker._prompt_cursor if context is None else context.ledger.prompt_cursor


def begin_histories(worker: ModelWorker, handles) -> None:
    """Mark the requests' sampling histories begun, as their first prompt chunk would have:
    a decode lane before it is refused (on the executors' ledger since issue 26)."""
    context = getattr(worker, "context", None)
    begun = getattr(worker, "_begun", None) if context is None else context.ledger.begun
    if begun is not None:
        begun.update(handles)


def lane(slot: int, role: LaneRole, prompt: int = 0, query: int = 0) -> LaneWork:
    return LaneWork(
        RequestHandle(slot, 1), 0, role, prompt, query, 1.0, 1.0, 1, prompt + query, 1.0
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2000)
    args = parser.parse_args()
    torch.set_num_threads(1)
    model = random_model(ModelConfig.tiny(), seed=1)
    options = LoadOptions(mixed_prefill=True, max_prefill_chunk=512, speculation="off")
    catalog = plan_catalog(get_recipe("qwen38"), options)
    state = ModelState.allocate(model.config, 4, 4 * 64, 64, 64)
    with use_backend("reference"):
        programs, _ = prepare_programs(model, state, catalog.descriptors, torch.device("cpu"))
    by_name = {d.name: d for d in catalog.descriptors}
    cases = {
        "decode, 4 rows": (
            "decode-b4-d0-w1-p4",
            [lane(s, LaneRole.DECODE, query=1) for s in range(4)],
        ),
        "mixed, 512-token chunk + 3 decoders": (
            "mixed-plain-b4-d0-w1-p4-c512",
            [lane(0, LaneRole.PROMPT, prompt=512)]
            + [lane(s, LaneRole.DECODE, query=1) for s in (1, 2, 3)],
        ),
    }
    live = {}
    for s in range(4):
        request = GenerationRequest(f"r{s}", tuple(range(5, 3000)), SamplingParams())
        detokenizer = IncrementalDetokenizer(Chars())
        live[RequestHandle(s, 1)] = LiveRequest(
            request, RequestHandle(s, 1), lambda c: None, detokenizer
        )
    print(f"{'frame':<38} | launch host us (median)")
    for title, (name, lanes) in cases.items():
        staging = getattr(programs[name][0], "staging", None)  # the page-table mirror, if any
        mirror = staging.mirrors["page_table"] if staging is not None else None
        resources = SlotResources(state, 4 * 64, *([mirror] if mirror is not None else []))
        worker = ModelWorker(state, programs, resources, frozenset())
        _, prepared = programs[name]
        with use_backend("reference"), torch.no_grad():
            prepared.run()  # allocate the static outputs once
        prepared.run = lambda needs_logprobs=True, p=prepared: p.outputs  # stub: host side only
        plan = ScheduledPlan(
            by_name[name], tuple(lanes), 0, 0, -1, 1.0, 0.0, SelectionReason.DISCOVERY, True, 0, 0
        )
        begin_histories(worker, [x.handle for x in lanes if x.role is LaneRole.DECODE])
        samples = []
        for i in range(args.repeats):
            prompt_cursor(worker).clear()  # every repeat binds the first chunk again
            began = time.perf_counter_ns()
            worker.launch(plan, Fence(i), live)
            samples.append((time.perf_counter_ns() - began) / 1e3)
        print(f"{title:<38} | {statistics.median(samples):.1f}")


if __name__ == "__main__":
    main()
