"""Issue 24, defect 1: a request whose sampling distribution is not finite fails alone.

Its row emits model.sampling.INVALID_TOKEN inside the program (no host read, no branch);
the worker reports the request as failed and the engine ends it with the cause while the
frame, and every other request in it, completes. Before the fix the NaN reached Helios's
confidence sidecar, the frame failed, and the innocent requests ended with ``error``.
"""

from __future__ import annotations

import pytest

from ignition.runtime.assembly import RuntimeOptions, assemble_engine
from ignition.runtime.requests.errors import RequestError
from ignition.runtime.requests.request import GenerationRequest, SamplingParams
from tests.runtime.tiny import tiny_catalog

PROMPT = (5, 9, 11, 17, 9)

pytestmark = pytest.mark.usefixtures("reference_kernels")


@pytest.fixture(scope="module")
def catalog():
    return tiny_catalog(max_prefill_chunk=64)


class CharDecoder:
    def decode(self, ids, skip_special_tokens: bool = True) -> str:
        return "".join(chr(0x4E00 + i) for i in ids)


def poisoned(**sampling) -> SamplingParams:
    """Sampling whose repetition penalty rounds to 0 in fp32: positive logits become +inf.

    Validation refuses such a value; the test sets it behind validation's back, as a model
    producing NaN logits would reach the sampling stage."""
    params = SamplingParams(max_tokens=8, ignore_eos=True, **sampling)
    object.__setattr__(params, "repetition_penalty", 1e-303)
    return params


def run(model, catalog, speculation: str, requests: dict[str, SamplingParams]):
    options = RuntimeOptions(
        num_slots=4, page_size=64, max_context_tokens=512, speculation=speculation
    )
    engine = assemble_engine(model, catalog, CharDecoder(), [2], options)
    chunks = {name: [] for name in requests}
    for name, params in requests.items():
        engine.submit(GenerationRequest(name, PROMPT, params), chunks[name].append)
    engine.run_until_idle(max_steps=3000)
    return {
        name: (
            [t for c in cs for t in c.token_ids],
            next(c.finish_reason for c in cs if c.finish_reason),
            next((c.error for c in cs if c.error), None),
        )
        for name, cs in chunks.items()
    }


@pytest.mark.parametrize("speculation", ["off", "fixed", "adaptive"])
def test_a_non_finite_distribution_fails_its_request_and_no_other(model, catalog, speculation):
    healthy = SamplingParams(max_tokens=8, temperature=0.0, ignore_eos=True)
    alone = run(model, catalog, speculation, {"good": healthy})
    together = run(
        model, catalog, speculation, {"bad": poisoned(temperature=1.0, seed=7), "good": healthy}
    )
    tokens, reason, error = together["bad"]
    assert (tokens, reason) == ([], "error")
    assert "not finite" in error
    assert together["good"] == alone["good"]
    assert alone["good"][1] == "length"


def test_a_greedy_request_with_infinite_logits_still_decodes_its_argmax(model, catalog):
    """Greedy sampling reads no probabilities: +inf logits have an argmax, so speculation
    on and off agree and nothing fails."""
    results = {
        mode: run(model, catalog, mode, {"greedy": poisoned(temperature=0.0)})["greedy"]
        for mode in ("off", "adaptive")
    }
    assert results["off"] == results["adaptive"]
    assert results["off"][1] == "length"


def test_a_repetition_penalty_below_one_hundredth_is_refused_by_name():
    with pytest.raises(RequestError, match=r"repetition_penalty = 1e-303: must be in \[0.01, 100"):
        SamplingParams(repetition_penalty=1e-303)


def test_a_positive_temperature_below_one_hundredth_is_raised_to_it_as_vllm_does():
    assert SamplingParams(temperature=1e-9).temperature == 0.01
    assert SamplingParams(temperature=0.0).is_greedy
