"""Several prompts in one prepared program (issue 39), through the engine.

The same concurrent greedy requests are served by a catalog whose prefill programs carry
one prompt each and by one that also prepares a four-lane prefill program; the direct
scheduler puts the waiting prompts into the four-lane program when it has one. Every
request's output is the same token for token (fp32, greedy), and the four-lane program
did run. Prompts of different lengths, logit bias (the per-lane history begin) and
prompt logprobs (each lane's hidden states) ride along.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import pytest
import torch

from ignition.components.capacity import plan_catalog
from ignition.direct.scheduler import direct_scheduler
from ignition.kernels import use_backend
from ignition.model.config import ModelConfig
from ignition.model.weights import random_model
from ignition.recipes import LoadOptions, get_recipe
from ignition.runtime.assembly import RuntimeOptions, assemble_engine
from ignition.runtime.requests.request import GenerationRequest, SamplingParams

PROMPTS = [list(range(3, 40)), list(range(50, 60)), [7, 9, 11, 13, 15, 17, 19], list(range(60, 91))]


class Chars:
    def decode(self, ids: Sequence[int], skip_special_tokens: bool = True) -> str:
        return "".join(chr(0x4E00 + i) for i in ids)


def _catalog(lanes: int):
    recipe = get_recipe("qwen38")
    if lanes > 1:
        capacity = dataclasses.replace(recipe.capacity, prompt_lanes=((256, lanes),))
        recipe = dataclasses.replace(recipe, capacity=capacity)
    return plan_catalog(recipe, LoadOptions(max_prefill_chunk=256, speculation="off"))


def _serve(model, lanes: int, config_name: str):
    options = RuntimeOptions(
        num_slots=4, page_size=64, max_context_tokens=256, speculation="off", mixed=False
    )
    with use_backend("reference"):
        engine = assemble_engine(
            model, _catalog(lanes), Chars(), [], options, scheduler_factory=direct_scheduler
        )
        ran: list[str] = []
        launch = engine.worker.launch

        def traced(plan, fence, live):
            ran.append(plan.descriptor.name)
            return launch(plan, fence, live)

        engine.worker.launch = traced
        chunks: dict[str, list] = {}
        for i, prompt in enumerate(PROMPTS):
            bias = ((5, 3.0),) if i == 1 else ()
            sampling = SamplingParams(
                max_tokens=6,
                temperature=0.0,
                ignore_eos=True,
                logit_bias=bias,
                prompt_logprobs=2 if i == 2 else None,
            )
            chunks[f"r{i}"] = []
            request = GenerationRequest(f"r{i}", tuple(prompt), sampling)
            engine.submit(request, chunks[f"r{i}"].append)
        engine.run_until_idle(max_steps=200)
    tokens = {rid: [t for c in cs for t in c.token_ids] for rid, cs in chunks.items()}
    scores = [c.prompt_logprobs for c in chunks["r2"] if c.prompt_logprobs is not None]
    return tokens, scores, ran


@pytest.fixture(scope="module", params=["tiny", "tiny_flash_next"])
def model(request):
    torch.manual_seed(0)
    return request.param, random_model(getattr(ModelConfig, request.param)(), seed=5)


def test_prompts_in_one_program_give_the_outputs_of_one_program_each(model):
    name, weights = model
    one, one_scores, one_ran = _serve(weights, 1, name)
    shared, shared_scores, shared_ran = _serve(weights, 4, name)
    assert all(len(t) == 6 for t in one.values())
    assert shared == one
    assert one_scores and len(shared_scores) == len(one_scores)
    for got, expected in zip(shared_scores[0][1:], one_scores[0][1:], strict=True):
        assert got.token_id == expected.token_id
        assert abs(got.logprob - expected.logprob) < 1e-4
    assert any(n.endswith("-l4") for n in shared_ran)
    assert not any(n.endswith("-l4") for n in one_ran)
    assert sum(n.startswith("prefill") for n in shared_ran) < len(PROMPTS)
