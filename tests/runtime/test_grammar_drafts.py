"""Grammar-constrained requests speculate with the drafts their grammar forces.

The host knows those drafts before launch, so it writes the grammar mask of every
verification position (runtime/grammar.py) and coupled verification keeps a draft only
where it equals the masked sample: the output is exactly that of masked single-token
decoding, whatever Helios plans, with drafts or without.
"""

from __future__ import annotations

import json

import pytest

from ignition.helios import HEAD_DRAFTS
from ignition.runtime.assembly import RuntimeOptions, assemble_engine
from ignition.runtime.grammar import GrammarSpec, GrammarState
from ignition.runtime.proposals import grammar_drafts
from ignition.runtime.proposals.grammar_drafts import GRAMMAR_DRAFTS
from ignition.runtime.requests.request import GenerationRequest, SamplingParams
from tests.runtime.structured import (
    SCHEMA,
    TokenizerDecoder,
    compiler,
    structured_model,
    valid_against_schema,
)
from tests.runtime.tiny import EOS, tiny_catalog

pytestmark = pytest.mark.usefixtures("reference_kernels")
PROMPT = (5, 9, 11, 17)
SPEC = GrammarSpec("json_schema", json.dumps(SCHEMA), "response_format.json_schema")
# (request id, temperature, seed)
REQUESTS = (("greedy", 0.0, 1), ("sampled", 1.0, 7))


def run(mode: str, frames: list | None = None, engines: list | None = None) -> dict[str, list[int]]:
    """{request id: output ids} of the two schema requests served together; ``frames``
    collects (request id, drafts verified, the lane's proposal source) per decode lane of
    every round; ``engines`` receives the engine."""
    options = RuntimeOptions(num_slots=4, page_size=64, max_context_tokens=512, speculation=mode)
    engine = assemble_engine(
        structured_model(), tiny_catalog(64), TokenizerDecoder(), [EOS], options
    )
    if frames is not None:

        def listen(plan, result):
            names = {live.handle: live.request.request_id for live in engine.live.values()}
            for i, lane in enumerate(plan.lanes):
                if lane.role.value == "decode" and result.num_offered_drafts:
                    offered = result.num_offered_drafts[i]
                    frames.append((names.get(lane.handle), offered, lane.proposal_source.name))

        engine.frame_listeners.append(listen)
    if engines is not None:
        engines.append(engine)
    chunks: dict[str, list] = {}
    for name, temperature, seed in REQUESTS:
        sampling = SamplingParams(
            max_tokens=48, temperature=temperature, seed=seed, grammar=compiler().compile(SPEC)
        )
        chunks[name] = []
        engine.submit(GenerationRequest(name, PROMPT, sampling), chunks[name].append)
    engine.run_until_idle(max_steps=5000)
    outputs = {}
    for name, got in chunks.items():
        assert got[-1].error is None, got[-1].error
        outputs[name] = [t for c in got for t in c.token_ids]
    return outputs


@pytest.fixture(scope="module")
def unspeculated():
    return run("off")


@pytest.mark.parametrize("mode", ["fixed", "adaptive"])
def test_a_constrained_output_is_the_same_with_speculation_off_fixed_and_adaptive(
    mode, unspeculated
):
    frames: list = []
    outputs = run(mode, frames)
    assert outputs == unspeculated  # greedy and seeded sampling alike
    assert sum(n for _, n, _ in frames) > 0, "no round verified a supplied draft"


def test_a_constrained_output_is_the_same_with_forced_drafts_and_without(monkeypatch, unspeculated):
    monkeypatch.setattr(GrammarState, "forced_drafts", lambda self: ())
    frames: list = []
    assert run("adaptive", frames) == unspeculated
    assert sum(n for _, n, _ in frames) == 0  # without supplied drafts it verifies none


def test_each_round_of_a_constrained_request_verifies_its_forced_drafts():
    """The JSON keys and punctuation a schema forces come as drafts: rounds serving the
    schema requests verify some, and the outputs still validate."""
    frames: list = []
    outputs = run("fixed", frames)
    by_request = {name: sum(n for who, n, _ in frames if who == name) for name, _, _ in REQUESTS}
    assert all(n > 0 for n in by_request.values()), by_request
    text = TokenizerDecoder().decode([t for t in outputs["greedy"] if t != EOS])
    assert valid_against_schema(text)


def test_copy_drafts_where_nothing_is_forced_keep_the_output(monkeypatch, unspeculated):
    """Copies of earlier context need not follow the grammar: the binding's walk keeps
    their grammar-valid prefix, and the output stays that of masked decoding."""
    monkeypatch.setattr(grammar_drafts, "COPY_WHEN_UNFORCED", True)
    frames: list = []
    assert run("fixed", frames) == unspeculated
    assert sum(n for _, n, _ in frames) > 0


def test_forced_drafts_are_priced_and_learned_as_the_grammar_source():
    """A constrained request's rounds verify its grammar's forced drafts, not the MTP
    head's: Helios prices them by the "grammar" source's acceptance, and they teach the
    learned source's population prior nothing (a request admitted after them starts at
    the untouched prior)."""
    from ignition.helios import RequestSpec

    frames: list = []
    engines: list = []
    run("fixed", frames, engines)
    assert {source for _, n, source in frames if n} == {"grammar"}
    # and they are counted under it: no learned-proposal draws
    assert set(engines[0].stats.snapshot().speculative_by_source) == {"grammar"}
    scheduler = engines[0].scheduler
    later = scheduler.admit(RequestSpec(16, 40))
    acceptance = scheduler.requests[later].acceptance
    assert acceptance.history(HEAD_DRAFTS).survivals(3) == (0.5, 0.25, 0.125)
    assert acceptance.history(GRAMMAR_DRAFTS).survivals(1)[0] > 0.5
