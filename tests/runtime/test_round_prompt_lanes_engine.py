"""Several prompts in one speculative mixed program (issue 39), through the engine.

Two greedy requests decode under adaptive speculation when two longer ones arrive. Helios
serves them from a catalog whose speculative mixed programs carry one prompt each and from
one that also prepares their two-lane twins (the build declares two lanes at every
bucket); every request's output is the same token for token (fp32, greedy), and a
two-lane speculative mixed program did run. Helios's costs are seeded from a weight-bound
rule and not re-measured (``_steady``), so its choices do not depend on the host's speed.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

from ignition.components.capacity import plan_catalog
from ignition.helios import helios_scheduler
from ignition.kernels import use_backend
from ignition.model.config import ModelConfig
from ignition.model.weights import random_model
from ignition.recipes import LoadOptions, get_recipe
from ignition.runtime.assembly import RuntimeOptions, assemble_engine
from ignition.runtime.requests.request import GenerationRequest, SamplingParams
from tests.runtime.test_prompt_lanes_engine import Chars

FIRST = [list(range(3, 40)), list(range(50, 60))]
LATER = [list(range(3, 123)), [5 + i % 100 for i in range(110)]]  # several chunks each
WARM_STEPS = 6


def _catalog(lanes: int):
    recipe = get_recipe("qwen38")
    if lanes > 1:
        declared = tuple((bucket, lanes) for bucket in (64, 128, 256))
        capacity = dataclasses.replace(recipe.capacity, prompt_lanes=declared)
        recipe = dataclasses.replace(recipe, capacity=capacity)
    return plan_catalog(recipe, LoadOptions(max_prefill_chunk=256, mixed_prefill=True))


def _steady(catalog, policy, resources, mode):
    """Helios with every program's cost seeded at 1 ms + 1 us per token (weight-bound: a
    second prompt lane costs little) and frames reported without a measured duration."""
    scheduler = helios_scheduler(catalog, policy, resources, mode)
    for d in catalog.descriptors:
        scheduler.seed_cost(d, 1_000_000 + 1_000 * (d.packed_capacity + d.prefill_capacity))
    complete = scheduler.complete

    def unmeasured(fence, report):
        timing = dataclasses.replace(report.timing, device_ns=0)
        return complete(fence, dataclasses.replace(report, timing=timing))

    scheduler.complete = unmeasured
    return scheduler


def _serve(model, lanes: int):
    options = RuntimeOptions(num_slots=4, page_size=64, max_context_tokens=256)
    with use_backend("reference"):
        engine = assemble_engine(
            model, _catalog(lanes), Chars(), [], options, scheduler_factory=_steady
        )
        ran: list[str] = []
        launch = engine.worker.launch

        def traced(plan, fence, live):
            ran.append(plan.descriptor.name)
            return launch(plan, fence, live)

        engine.worker.launch = traced
        chunks: dict[str, list] = {}

        def submit(i: int, prompt: list[int]) -> None:
            sampling = SamplingParams(max_tokens=20, temperature=0.0, ignore_eos=True)
            chunks[f"r{i}"] = []
            request = GenerationRequest(f"r{i}", tuple(prompt), sampling)
            engine.submit(request, chunks[f"r{i}"].append)

        for i, prompt in enumerate(FIRST):
            submit(i, prompt)
        for _ in range(WARM_STEPS):  # both first prompts in, decoding
            engine.step()
        for i, prompt in enumerate(LATER, start=len(FIRST)):
            submit(i, prompt)
        engine.run_until_idle(max_steps=300)
    tokens = {rid: [t for c in cs for t in c.token_ids] for rid, cs in chunks.items()}
    return tokens, ran


@pytest.fixture(scope="module", params=["tiny", "tiny_flash_next"])
def model(request):
    torch.manual_seed(0)
    return random_model(getattr(ModelConfig, request.param)(), seed=5)


def test_prompts_in_one_speculative_mixed_program_give_the_outputs_of_one_each(model):
    one, one_ran = _serve(model, 1)
    shared, shared_ran = _serve(model, 2)
    assert all(len(t) == 20 for t in one.values())
    assert shared == one
    assert any(n.startswith("mixed-spec") and n.endswith("-l2") for n in shared_ran)
    assert not any(n.endswith("-l2") for n in one_ran)
