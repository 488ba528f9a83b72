"""Requests whose speculative method is "ngram" verify copies of their own context.

The host finds each decoding row's copy proposal (the continuation of its latest suffix
earlier in prompt + output) and supplies it as the round's drafts; Helios prices the
request by the copy source's acceptance and plans as many drafts as the copy holds.
Verification is coupled (q one-hot), so the output is that of decoding without drafts.
"""

from __future__ import annotations

import pytest

from ignition.runtime.assembly import RuntimeOptions, assemble_engine
from ignition.runtime.proposals.copy_proposals import PromptLookup
from ignition.runtime.requests.errors import RequestError
from ignition.runtime.requests.request import GenerationRequest, SamplingParams
from tests.runtime.tiny import EOS, CharDecoder

pytestmark = pytest.mark.usefixtures("reference_kernels")
# Every token id once (the tiny model's vocabulary is 128): with one-token lookups
# (--prompt-lookup-min 1) every round of a copying request has a copy to verify (most are
# rejected; the output must not change either way).
PROMPT = tuple(range(3, 128))
ONE_TOKEN = PromptLookup(min_ngram=1)
# (request id, temperature, seed)
REQUESTS = (("greedy", 0.0, 1), ("seeded", 1.0, 7))


def run(model, catalog, mode: str, method: str, seen: dict | None = None) -> dict:
    """{request id: output ids} of the requests served together; ``seen`` collects the
    drafts verified per request and the proposal source Helios was given for it."""
    options = RuntimeOptions(
        num_slots=4,
        page_size=64,
        max_context_tokens=512,
        speculation=mode,
        prompt_lookup=ONE_TOKEN,
    )
    engine = assemble_engine(model, catalog, CharDecoder(), [EOS], options)
    if seen is not None:

        def listen(plan, result):
            for i, lane in enumerate(plan.lanes):
                live = engine.live.get(lane.handle)
                if live is None or lane.role.value != "decode" or not result.num_offered_drafts:
                    continue
                name = live.request.request_id
                view = engine.scheduler.requests[lane.handle]
                seen.setdefault(name, [0, set()])
                seen[name][0] += result.num_offered_drafts[i]
                seen[name][1].add(view.spec.proposal_source.name)
                if result.num_offered_drafts[i]:
                    seen.setdefault("lane sources", set()).add(lane.proposal_source.name)

        engine.frame_listeners.append(listen)
    chunks: dict[str, list] = {}
    for name, temperature, seed in REQUESTS:
        sampling = SamplingParams(
            max_tokens=40,
            temperature=temperature,
            seed=seed,
            ignore_eos=True,
            speculative_method=method,
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
def unspeculated(model, catalog):
    with _reference():
        return run(model, catalog, "off", "mtp")


def _reference():
    from ignition.kernels.dispatch import use_backend

    return use_backend("reference")


@pytest.mark.parametrize("method", ["ngram", "both"])
@pytest.mark.parametrize("mode", ["off", "fixed", "adaptive"])
def test_output_is_the_same_with_copy_proposals_on_and_off(
    model, catalog, mode, method, unspeculated
):
    seen: dict = {}
    assert run(model, catalog, mode, method, seen) == unspeculated  # greedy and seeded
    sources = seen.pop("lane sources", set())
    if mode != "off":
        assert all(n > 0 for n, _ in seen.values()), f"no round verified drafts: {seen}"
        # "both": Helios gave some rounds the copy and some the head's drafts
        assert sources == ({"ngram"} if method == "ngram" else {"mtp", "ngram"})


def test_helios_prices_a_copying_request_by_the_copy_source(model, catalog):
    seen: dict = {}
    run(model, catalog, "fixed", "ngram", seen)
    seen.pop("lane sources")
    assert {name: sources for name, (_, sources) in seen.items()} == {
        "greedy": {"ngram"},
        "seeded": {"ngram"},
    }


def test_an_unknown_speculative_method_is_refused():
    with pytest.raises(RequestError, match="speculative_method = 'eagle'"):
        SamplingParams(speculative_method="eagle")


def greedy(model, catalog, prompt, method: str, max_tokens: int = 12):
    """(output ids, engine stats) of one greedy request served alone in fixed mode."""
    options = RuntimeOptions(num_slots=2, page_size=64, max_context_tokens=512, speculation="fixed")
    engine = assemble_engine(model, catalog, CharDecoder(), [EOS], options)
    sampling = SamplingParams(
        max_tokens=max_tokens, temperature=0.0, ignore_eos=True, speculative_method=method
    )
    got: list = []
    engine.submit(GenerationRequest("r", tuple(prompt), sampling), got.append)
    engine.run_until_idle(max_steps=5000)
    return [t for c in got for t in c.token_ids], engine.stats.snapshot()


def test_a_copy_of_the_models_own_earlier_continuation_is_accepted(model, catalog):
    """A prompt holding P, the model's greedy continuation g of P, then P again: the copy
    after the second P is g, which the output repeats for its first tokens. The rounds
    verify those copies (the MTP head's drafts would not be them) and accept them."""
    base = (5, 9, 11, 17, 23, 31, 40, 7, 66, 12)
    earlier, _ = greedy(model, catalog, base, "mtp")
    output, stats = greedy(model, catalog, (*base, *earlier, *base), "ngram")
    repeated = next(
        (i for i, (a, b) in enumerate(zip(output, earlier, strict=True)) if a != b), len(output)
    )
    assert repeated >= 4, "the workload's output no longer repeats its prompt"
    copies = stats.speculative_by_source["ngram"]
    # after the prompt's token, each round's copy holds the repeat: all but one token of
    # each round's output are accepted copies
    assert copies.accepted_tokens >= repeated - 1 - copies.rounds > 0
    assert "mtp" not in stats.speculative_by_source  # no learned-proposal draws


def test_helios_gives_a_repeating_request_its_copies_when_it_may_choose(model, catalog):
    """ "both" on the repeat workload: the head's drafts are poor on a repeat the copy
    holds, so Helios moves the rounds to the copy; the output is greedy decoding's, and
    each source's counters hold only the rounds its lanes carried."""
    base = (5, 9, 11, 17, 23, 31, 40, 7, 66, 12)
    earlier, _ = greedy(model, catalog, base, "mtp")
    prompt = (*base, *earlier, *base)
    alone, _ = greedy(model, catalog, prompt, "mtp")
    output, stats = greedy(model, catalog, prompt, "both")
    assert output == alone
    by_source = stats.speculative_by_source
    assert by_source["ngram"].rounds > 0 and by_source["ngram"].accepted_tokens > 0
    copied, _ = greedy(model, catalog, prompt, "ngram")
    assert copied == alone


def test_only_the_rounds_helios_gave_the_copy_stage_it(model, catalog, monkeypatch):
    """Every round of PROMPT's requests has a copy (one-token lookups); under "both" the
    rows whose lane carries the head's source stage none, so their drafts are the head's
    and their acceptance is the head's to learn."""
    from ignition.runtime.executors import program

    staged: dict[str, list[int]] = {"mtp": [], "ngram": []}
    real = program.bind_drafts

    def spy(prog, frame, row, lane, live, proposals):
        count = real(prog, frame, row, lane, live, proposals)
        if lane.role.value == "decode" and lane.query_length > 1:
            staged[lane.proposal_source.name].append(count)
        return count

    monkeypatch.setattr(program, "bind_drafts", spy)
    run(model, catalog, "fixed", "both")
    assert staged["mtp"] and set(staged["mtp"]) == {0}
    assert staged["ngram"] and min(staged["ngram"]) > 0
