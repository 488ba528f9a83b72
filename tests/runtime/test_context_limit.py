"""Issue 38: speculation respects the slot's capacity; a request runs to its context limit.

A speculative round writes its verification rows and its draft lookahead (D + 1) past the
slot's committed length. Helios bounds the rows by the request's remaining context
(decide/rounds.lane_ceiling); the worker covers the write extent from the slot's length
bound (runtime/executors/resources.py), which must come back to what each frame committed. Before
the fix the bound grew by every rejected draft, and a request speculating with the random
model's MTP head (most drafts rejected) failed with ``ResourceError: ... exceed the per-slot
capacity`` long before its limit.
"""

from __future__ import annotations

import json

import pytest

from ignition.runtime.assembly import RuntimeOptions, assemble_engine
from ignition.runtime.grammar import GrammarSpec
from ignition.runtime.requests.request import GenerationRequest, SamplingParams
from tests.runtime.tiny import EOS, CharDecoder, tiny_catalog

pytestmark = pytest.mark.usefixtures("reference_kernels")
# Pages of 16 tokens and a limit that fills the last page with the largest round's lookahead
# (12 for this catalog, W + D + 1): the slot holds no token more than a round can write.
PAGE = 16
CONTEXT = 68
PROMPT = tuple(range(3, 11))  # 8 tokens
NEIGHBOUR = (40, 41, 42)


def engine_for(model, catalog, mode: str):
    options = RuntimeOptions(
        num_slots=4, page_size=PAGE, max_context_tokens=CONTEXT, speculation=mode,
        snapshot_rows=0,
    )
    return assemble_engine(model, catalog, CharDecoder(), [EOS], options)


def run(engine, requests: dict[str, tuple[tuple[int, ...], SamplingParams]]) -> dict:
    chunks: dict[str, list] = {name: [] for name in requests}
    for name, (prompt, sampling) in requests.items():
        engine.submit(GenerationRequest(name, prompt, sampling), chunks[name].append)
    engine.run_until_idle(max_steps=5000)
    return {
        name: ([t for c in got for t in c.token_ids], got[-1].finish_reason, got[-1].error)
        for name, got in chunks.items()
    }


def greedy(max_tokens: int, method: str = "mtp") -> SamplingParams:
    return SamplingParams(
        max_tokens=max_tokens, temperature=0.0, ignore_eos=True, speculative_method=method
    )


def assert_nothing_held(engine) -> None:
    usage = engine.scheduler.usage()
    assert usage.num_free_slots == usage.num_request_slots
    assert usage.num_free_pages == usage.num_pages
    resources = engine.worker.context.resources
    assert resources.num_free_pages == resources.state.num_pages - 1  # the scratch page
    assert not engine.live and not engine.has_work


@pytest.mark.parametrize("mode", ["off", "fixed", "adaptive"])
def test_every_proposal_source_runs_to_the_context_limit_and_ends_with_length(
    model, catalog, mode, caplog
):
    room = CONTEXT - len(PROMPT)
    engine = engine_for(model, catalog, mode)
    alone = run(engine, {"neighbour": (NEIGHBOUR, greedy(12))})["neighbour"]
    requests = {
        f"{method}-{limit}": (PROMPT, greedy(limit, method))
        for method in ("mtp", "ngram", "both")
        for limit in (room, 100_000)
    }
    together = run(engine, {**requests, "neighbour": (NEIGHBOUR, greedy(12))})
    for name in requests:
        tokens, reason, error = together[name]
        assert (reason, error) == ("length", None), name
        assert len(tokens) == room, name
    assert together["neighbour"] == alone
    assert_nothing_held(engine)
    # no frame failed on the way (a shared failed frame restarts its requests, which would
    # hide the failure in the outputs)
    assert not [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]


def test_the_slot_length_bound_comes_back_to_what_each_frame_committed(model, catalog):
    """After every frame read back, the worker's bound on a decoding slot's length is
    its committed length (prompt + output less the pending token) plus the advances of
    its frames still unread: rejected drafts do not accumulate."""
    engine = engine_for(model, catalog, "fixed")
    resources = engine.worker.context.resources
    seen = []

    def check(plan, result):
        for lane in plan.lanes:
            live = engine.live.get(lane.handle)
            if live is None or lane.role.value != "decode" or live.is_done:
                continue
            unread = engine.worker.context.ledger.unread.get(lane.handle, 0)
            committed = len(PROMPT) + len(live.output_ids) - 1
            bound = resources.length_bound(lane.handle.slot)
            seen.append(bound - committed)
            assert committed <= bound <= committed + unread * (CONTEXT - len(PROMPT))

    engine.frame_listeners.append(check)
    out = run(engine, {"r": (PROMPT, greedy(CONTEXT - len(PROMPT)))})["r"]
    assert out[1:] == ("length", None)
    assert seen and min(seen) == 0


@pytest.mark.parametrize("mode", ["fixed", "adaptive"])
def test_a_constrained_request_runs_to_the_context_limit_and_ends_with_length(mode, caplog):
    """The "grammar" source: its rows verify the drafts its grammar forces, bounded by the
    same ceiling. The greedy JSON object never closes on this model, so it meets the limit;
    the schema's forced keys make rows of several drafts near it."""
    # the structured-output helpers train a tokenizer: imported by the one test using them
    from tests.runtime.structured import SCHEMA, TokenizerDecoder, compiler, structured_model

    options = RuntimeOptions(
        num_slots=4, page_size=PAGE, max_context_tokens=CONTEXT, speculation=mode,
        snapshot_rows=0,
    )
    engine = assemble_engine(
        structured_model(), tiny_catalog(64), TokenizerDecoder(), [EOS], options
    )
    specs = {
        "object": GrammarSpec("json_object", "", "response_format"),
        "schema": GrammarSpec("json_schema", json.dumps(SCHEMA), "response_format.json_schema"),
    }
    requests = {
        name: (
            PROMPT,
            SamplingParams(max_tokens=100_000, temperature=0.0, grammar=compiler().compile(spec)),
        )
        for name, spec in specs.items()
    }
    out = run(engine, requests)
    assert out["object"][1:] == ("length", None)
    assert len(out["object"][0]) == CONTEXT - len(PROMPT)
    assert out["schema"][2] is None and out["schema"][1] in ("length", "stop")
    assert_nothing_held(engine)
    assert not [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
