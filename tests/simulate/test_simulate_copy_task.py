"""The simulator's copy-friendly task ("edit"): its requests speculate with copies of
their context, so Helios tracks and prices their acceptance under the copy source."""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path

import yaml

from ignition.simulate.acceptance import TASKS, parse_mix
from ignition.simulate.scenario import scenario_from_dict
from ignition.simulate.sim import Simulation
from ignition.simulate.workloads import SimRequest, with_tasks

STARTUP = yaml.safe_load((Path(__file__).parent / "scenarios" / "startup.yaml").read_text())


def test_edit_requests_take_the_copy_source_and_the_others_the_learned_one():
    requests = [SimRequest(float(i), 10, 10) for i in range(200)]
    out = with_tasks(requests, parse_mix("edit:1,code:1"), seed=1)
    assert {r.task for r in out} == {"edit", "code"}
    assert all(r.proposal_source == TASKS[r.task].proposal_source for r in out)
    assert TASKS["edit"].proposal_source == "ngram" and TASKS["code"].proposal_source == "mtp"


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
    assert [r.spec.proposal_source for r in admitted] == ["ngram", "ngram"]
    learned = [r.acceptance.history("ngram").weight(1) for r in admitted]
    assert max(learned) > 2.0  # copy rounds were observed under the copy source
