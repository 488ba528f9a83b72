"""A proposal source defined here alone, registered, and served: adding a source is its
class plus one ``register`` call (runtime/proposals/registry.py).

The toy source proposes the next tokens of a continuation it was given (right: the greedy
output; wrong: every token shifted by one). Coupled verification keeps greedy output the
same whichever drafts it verifies; the toy's drafts are verified, accepted when right,
counted under its own name and learned by Helios under its own DraftSource.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from ignition.helios import DraftSource, RequestSpec
from ignition.runtime.assembly import RuntimeOptions, assemble_engine
from ignition.runtime.proposals.registry import methods, register, unregister
from ignition.runtime.proposals.source import DraftRow
from ignition.runtime.requests.errors import RequestError
from ignition.runtime.requests.request import GenerationRequest, SamplingParams
from tests.runtime.tiny import EOS, CharDecoder

pytestmark = pytest.mark.usefixtures("reference_kernels")
PROMPT = (5, 9, 11, 17, 23, 31, 40, 7, 66, 12)
MAX_TOKENS = 24
TOY = DraftSource("toy")


@dataclass(frozen=True)
class ScriptDrafts:
    """Drafts read off a fixed continuation of PROMPT (the toy ``ProposalSource``)."""

    script: tuple[int, ...]
    source: DraftSource = TOY
    host_drafts: bool = True

    def draft_limit(self) -> int | None:
        return 0

    def offer(self, row: DraftRow) -> int | None:
        return len(self.drafts(row, 16))

    def drafts(self, row: DraftRow, max_drafts: int) -> tuple[int, ...]:
        done = len(row.output_ids)
        return self.script[done : done + max(0, max_drafts)]


def serve(model, catalog, method: str, speculation: str = "fixed"):
    """(greedy output ids, engine) of one request of PROMPT served alone."""
    options = RuntimeOptions(
        num_slots=2, page_size=64, max_context_tokens=512, speculation=speculation
    )
    engine = assemble_engine(model, catalog, CharDecoder(), [EOS], options)
    sampling = SamplingParams(
        max_tokens=MAX_TOKENS, temperature=0.0, ignore_eos=True, speculative_method=method
    )
    got: list = []
    engine.submit(GenerationRequest("r", PROMPT, sampling), got.append)
    engine.run_until_idle(max_steps=5000)
    assert got[-1].error is None, got[-1].error
    return [t for c in got for t in c.token_ids], engine


@pytest.fixture(scope="module")
def greedy(model, catalog):
    from ignition.kernels.dispatch import use_backend

    with use_backend("reference"):
        return serve(model, catalog, "mtp", "off")[0]


@pytest.fixture
def toy_source():
    """Registers the toy under "toy" with the given script, and forgets it afterwards."""

    def install(script: tuple[int, ...]) -> None:
        register(ScriptDrafts(script))

    yield install
    unregister("toy")


def test_an_unregistered_source_is_refused_by_name():
    assert "toy" not in methods()
    with pytest.raises(RequestError, match="speculative_method = 'toy': must be one of mtp"):
        SamplingParams(speculative_method="toy")


def test_a_registered_source_serves_and_its_right_drafts_are_accepted(
    model, catalog, greedy, toy_source
):
    toy_source(tuple(greedy))
    output, engine = serve(model, catalog, "toy")
    assert output == greedy
    counts = engine.stats.snapshot().speculative_by_source
    assert set(counts) == {"toy"}  # every verified draft was the toy's
    toy = counts["toy"]
    assert toy.rounds > 0 and toy.accepted_tokens > 0
    # right drafts: all but those past the request's last token are accepted
    assert toy.accepted_tokens >= toy.draft_tokens - toy.rounds
    # and Helios learned them under the toy's name: a later request starts above the prior
    later = engine.scheduler.admit(RequestSpec(16, 40, proposal_source=TOY))
    assert engine.scheduler.requests[later].acceptance.history(TOY).survivals(1)[0] > 0.5


def test_a_registered_sources_wrong_drafts_are_verified_and_refused(
    model, catalog, greedy, toy_source
):
    toy_source(tuple((t + 1) % 128 for t in greedy))  # the tiny model's vocabulary: 128
    output, engine = serve(model, catalog, "toy")
    assert output == greedy
    toy = engine.stats.snapshot().speculative_by_source["toy"]
    assert toy.rounds > 0 and toy.draft_tokens > 0 and toy.accepted_tokens == 0
    assert "toy" in methods()
