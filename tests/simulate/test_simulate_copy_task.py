"""The simulator's copy-friendly task ("edit"): its requests speculate with copies of
their context, so Helios tracks and prices their acceptance under the copy source."""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path

import yaml

from ignition.helios import HEAD_DRAFTS, DraftSource
from ignition.simulate.acceptance import COPIES, TASKS, parse_mix
from ignition.simulate.scenario import scenario_from_dict
from ignition.simulate.sim import Simulation
from ignition.simulate.workloads import SimRequest, with_tasks

STARTUP = yaml.safe_load((Path(__file__).parent / "scenarios" / "startup.yaml").read_text())


def test_edit_requests_take_the_copy_source_and_the_others_the_learned_one():
    requests = [SimRequest(float(i), 10, 10) for i in range(200)]
    out = with_tasks(requests, parse_mix("edit:1,code:1"), seed=1)
    assert {r.task for r in out} == {"edit", "code"}
    assert all(r.proposal_source == TASKS[r.task].proposal_source for r in out)
    assert TASKS["edit"].proposal_source == COPIES and TASKS["code"].proposal_source == HEAD_DRAFTS


def test_the_simulated_scheduler_learns_an_edit_requests_acceptance_under_the_copy_source():
    data = copy.deepcopy(STARTUP)
    data["requests"] = [{"count": 2, "prompt_tokens": 64, "output_tokens": 200}]
    scenario = scenario_from_dict(data)
    edit = with_tasks(scenario.requests, {"edit": 1.0}, seed=3)
    sim = Simulation(dataclasses.replace(scenario, requests=tuple(edit)))
    admitted = []
    admit = sim.scheduler.admit

    def keep(spec):
        handle = admit(spec)
        admitted.append(sim.scheduler.requests[handle])
        return handle

    sim.scheduler.admit = keep
    sim.run()
    assert [r.spec.proposal_source for r in admitted] == [COPIES, COPIES]
    learned = [r.acceptance.history(COPIES).weight(1) for r in admitted]
    assert max(learned) > 2.0  # copy rounds were observed under the copy source


def _edits(method_choices: tuple[str, ...], found: float, seed: int = 3, **fields):
    data = copy.deepcopy(STARTUP)
    data["requests"] = [{"count": 2, "prompt_tokens": 64, "output_tokens": 300}]
    scenario = scenario_from_dict(data)
    choices = tuple(DraftSource(m) for m in method_choices)
    edit = [
        dataclasses.replace(r, proposal_choices=choices, copy_found=found, **fields)
        for r in with_tasks(scenario.requests, {"edit": 1.0}, seed=seed)
    ]
    sim = Simulation(dataclasses.replace(scenario, requests=tuple(edit)))
    return sim.run()


def test_edit_requests_carry_their_copies_and_the_heads_acceptance_apart():
    out = with_tasks([SimRequest(0.0, 10, 10)], {"edit": 1.0}, seed=1)[0]
    assert out.copy_found == TASKS["edit"].copy.found and out.copies
    assert len(out.copy_acceptance) == len(out.acceptance) and out.copy_acceptance != out.acceptance


def test_a_copy_request_that_never_finds_a_copy_verifies_no_drafts():
    report = _edits((), found=1e-12)
    assert set(report["speculation"]) == {"all"}  # no round verified drafts
    report = _edits((), found=1.0)
    assert set(report["speculation"]) == {"all", "ngram"}


def test_the_simulated_scheduler_chooses_each_rounds_source_when_it_may():
    """ "both": Helios is offered the copy after every frame and gives rounds to each
    source, and each round is drawn from the source its lane carried: here the head's
    drafts are never right and the copies always are."""
    report = _edits(("mtp", "ngram"), found=0.5, acceptance=(0.0,) * 8, copy_acceptance=(1.0,) * 8)
    counts = report["speculation"]
    assert {"mtp", "ngram"} <= set(counts)
    assert counts["mtp"]["tokens"] == counts["mtp"]["frames"]  # one token a round
    assert counts["ngram"]["tokens"] > 2 * counts["ngram"]["frames"]
    assert counts["ngram"]["frames"] > counts["mtp"]["frames"]  # Helios learned which pays
