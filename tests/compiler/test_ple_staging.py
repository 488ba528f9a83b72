"""Double-buffered staging of a frame's known PLE rows (docs/ple.md, GPU): two queued frames
stage through different host sets, so the second never overwrites the rows the first's
copies read, and a set is rewritten only after the copies that read it have run."""

from __future__ import annotations

import torch

from ignition.compiler.ple_input import NO_ROW, allocate_ple_rows, stage_rows
from ignition.compiler.ple_staging import PleStaging

CPU = torch.device("cpu")


class LoggedFence:
    def __init__(self, log: list[str], name: str) -> None:
        self.log, self.name = log, name

    def record(self) -> None:
        self.log.append(f"record {self.name}")

    def synchronize(self) -> None:
        self.log.append(f"wait {self.name}")


def frame(first: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    ids = torch.tensor([first, first + 2])
    return [(ids, torch.full((2, 3), float(first)))]


def test_two_queued_frames_stage_through_different_host_sets():
    staged = allocate_ple_rows([4], [3], [0], torch.float32, CPU)
    staging = PleStaging(staged)
    assert staging.stage(staged, frame(1)) != staging.stage(staged, frame(5))
    first, second = staging.sets
    assert first.ids[0][:2].tolist() == [1, 3] and second.ids[0][:2].tolist() == [5, 7]
    assert first.rows[0][:2].eq(1.0).all()


def test_a_set_is_rewritten_only_after_waiting_for_its_copies():
    log: list[str] = []
    names = iter("ab")
    staged = allocate_ple_rows([4], [3], [0], torch.float32, CPU)
    staging = PleStaging(staged, fence=lambda: LoggedFence(log, next(names)))
    for first in (1, 5, 9):
        staging.stage(staged, frame(first))
    assert log == ["wait a", "record a", "wait b", "record b", "wait a", "record a"]


def test_the_program_sees_what_stage_rows_writes():
    staged = allocate_ple_rows([4], [3], [0], torch.float32, CPU)
    direct = allocate_ple_rows([4], [3], [0], torch.float32, CPU)
    PleStaging(staged).stage(staged, frame(2))
    stage_rows(direct, 0, *frame(2)[0])
    assert torch.equal(staged.ids[0], direct.ids[0])
    assert staged.ids[0][2:].eq(NO_ROW).all()
    assert torch.equal(staged.rows[0][:2], direct.rows[0][:2])
