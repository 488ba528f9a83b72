"""Issue 38, property: random request mixes run to random context limits in every speculation
mode and proposal source, and nothing a request asks for costs another request or the loop.

Each example serves 1-3 greedy requests together (their prompts, proposal sources and
``max_tokens``, often past the context, drawn at random) under a random context limit, and
holds: every request ends with ``length`` at exactly ``min(max_tokens, limit - prompt)``
tokens, its tokens are those it decodes alone (greedy: the limit only truncates them), no
frame failed on the way, the loop never stopped, and no slot or page is held at the end.
Bounded for CI: few derandomized examples, the shared tiny model, short contexts.
"""

from __future__ import annotations

import logging

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ignition.kernels.dispatch import use_backend
from ignition.runtime.assembly import RuntimeOptions, assemble_engine
from ignition.runtime.requests.request import GenerationRequest, SamplingParams
from tests.runtime.tiny import EOS, CharDecoder

PAGE = 16
MAX_CONTEXT = 72
PROMPTS = (tuple(range(3, 11)), (50, 51, 50, 51, 50), (90, 7, 33))
MODES = ("off", "fixed", "adaptive")
METHODS = ("mtp", "ngram", "both")


class Errors(logging.Handler):
    """Collects the engine's ERROR records (a failed frame logs one)."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def serve(model, catalog, mode: str, context: int, requests: list[tuple[int, str, int]]):
    """{index: (tokens, finish_reason, error)} of ``requests`` (prompt index, method,
    max_tokens) served together; the engine is returned to check what it still holds."""
    options = RuntimeOptions(
        num_slots=4, page_size=PAGE, max_context_tokens=context, speculation=mode,
        snapshot_rows=0,
    )
    engine = assemble_engine(model, catalog, CharDecoder(), [EOS], options)
    chunks: dict[int, list] = {}
    for i, (prompt, method, max_tokens) in enumerate(requests):
        sampling = SamplingParams(
            max_tokens=max_tokens, temperature=0.0, ignore_eos=True, speculative_method=method
        )
        chunks[i] = []
        engine.submit(GenerationRequest(f"r{i}", PROMPTS[prompt], sampling), chunks[i].append)
    engine.run_until_idle(max_steps=5000)  # a stopped loop raises here
    outputs = {
        i: ([t for c in got for t in c.token_ids], got[-1].finish_reason, got[-1].error)
        for i, got in chunks.items()
    }
    return outputs, engine


@pytest.fixture(scope="module")
def alone(model, catalog):
    """Each prompt's greedy output decoded alone to MAX_CONTEXT, per mode (lazily)."""
    cache: dict[tuple[str, int], list[int]] = {}

    def get(mode: str, prompt: int) -> list[int]:
        if (mode, prompt) not in cache:
            outputs, _ = serve(model, catalog, mode, MAX_CONTEXT, [(prompt, "mtp", 10_000)])
            cache[mode, prompt] = outputs[0][0]
        return cache[mode, prompt]

    return get


requests = st.lists(
    st.tuples(
        st.integers(0, len(PROMPTS) - 1),
        st.sampled_from(METHODS),
        st.one_of(st.integers(1, 80), st.just(100_000)),
    ),
    min_size=1,
    max_size=3,
)


@settings(
    max_examples=9,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(mode=st.sampled_from(MODES), context=st.integers(24, MAX_CONTEXT), mix=requests)
def test_random_mixes_to_random_context_limits_end_with_length_and_harm_no_one(
    model, catalog, alone, mode, context, mix
):
    errors = Errors()
    logging.getLogger("ignition").addHandler(errors)
    try:
        with use_backend("reference"):
            outputs, engine = serve(model, catalog, mode, context, mix)
            expected = {
                i: alone(mode, prompt)[: min(max_tokens, context - len(PROMPTS[prompt]))]
                for i, (prompt, _, max_tokens) in enumerate(mix)
            }
    finally:
        logging.getLogger("ignition").removeHandler(errors)
    assert not errors.messages
    for i, (tokens, reason, error) in outputs.items():
        assert (reason, error) == ("length", None), (i, mix[i])
        assert tokens == expected[i], (i, mix[i])
    usage = engine.scheduler.usage()
    assert usage.num_free_slots == usage.num_request_slots
    assert usage.num_free_pages == usage.num_pages
    resources = engine.worker.context.resources
    assert resources.num_free_pages == resources.state.num_pages - 1  # the scratch page
    assert not engine.live and not engine.has_work
