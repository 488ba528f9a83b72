"""Test-only fault injection: make chosen requests fail at a chosen stage."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from ignition.helios import LaneRole
from ignition.runtime.loop.engine import Engine
from ignition.runtime.requests.table import LiveRequest

ENV = "IGNITION_TEST_FAULTS"
STAGES = ("launch", "wait", "publish", "step")


class InjectedFault(RuntimeError):
    """Raised where a test asked for a failure."""


@dataclass(frozen=True)
class FaultPlan:
    markers: dict[str, int]
    # per stage: the output tokens a marked request must have before it fails there
    after_tokens: dict[str, int] = field(default_factory=dict)

    @classmethod
    def parse(cls, text: str) -> FaultPlan:
        markers, after = {}, {}
        for item in filter(None, (part.strip() for part in text.split(","))):
            stage, _, target = item.partition("=")
            token, _, count = target.partition("@")
            if stage not in STAGES or not token.isdigit() or not (count or "0").isdigit():
                raise ValueError(
                    f"{ENV}: {item!r}: expected STAGE=TOKEN_ID[@OUTPUT_TOKENS] with STAGE one "
                    f"of {STAGES}"
                )
            markers[stage] = int(token)
            after[stage] = int(count or 0)
        return cls(markers, after)

    @classmethod
    def from_env(cls) -> FaultPlan | None:
        text = os.environ.get(ENV, "")
        return cls.parse(text) if text else None

    def hits(self, stage: str, live: LiveRequest) -> bool:
        marker = self.markers.get(stage)
        return (
            marker is not None
            and live.request.prompt_ids[:1] == (marker,)
            and len(live.output_ids) >= self.after_tokens.get(stage, 0)
        )

    def check(self, stage: str, live: LiveRequest) -> None:
        if self.hits(stage, live):
            raise InjectedFault(f"injected {stage} fault for {live.request.request_id}")


class FaultyWorker:
    """Wraps a worker; raises at launch or wait for frames holding a marked request."""

    def __init__(self, inner, plan: FaultPlan) -> None:
        self.inner = inner
        self.plan = plan

    def launch(self, plan, fence, live):
        lanes = [
            live[lane.handle]
            for lane in plan.lanes
            if lane.handle in live and lane.role is not LaneRole.INIT
        ]
        for request in lanes:
            self.plan.check("launch", request)
        doomed = next((r for r in lanes if self.plan.hits("wait", r)), None)
        return self.inner.launch(plan, fence, live), doomed

    def wait(self, pending):
        launched, doomed = pending
        result = self.inner.wait(launched)
        if doomed is not None:
            self.plan.check("wait", doomed)
        return result

    def release(self, handle) -> None:
        self.inner.release(handle)

    def __getattr__(self, name: str):
        return getattr(self.inner, name)


def install(engine: Engine, plan: FaultPlan) -> None:
    """Wrap the engine's worker and set its fault hook."""
    engine.worker = FaultyWorker(engine.worker, plan)
    engine.fault_hook = plan.check
