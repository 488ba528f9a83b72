"""``open_engine`` hands every hook to the assembly in one call: the grammar compiler, the
vocabulary bound, the trace recorder and the fault plan travel as ``assemble_engine``
arguments, never set on the engine afterwards. The bundle's load and the assembly are
replaced, so no model is built."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

import ignition.serving.engine as serving_engine
from ignition.runtime.grammar import GrammarError, GrammarSpec, LazyGrammarCompiler
from ignition.runtime.loop.faults import FaultPlan
from ignition.runtime.tracing.recorder import TraceRecorder
from ignition.serving.engine import ServeOptions, open_engine

VOCAB = 97


@pytest.fixture
def assembled(monkeypatch) -> list[dict]:
    """The keyword arguments of each ``assemble_engine`` call ``open_engine`` makes."""
    config = SimpleNamespace(vocab_size=VOCAB, max_position_embeddings=256)
    runtime = {"speculation": "off", "num_slots": 2, "page_size": 16}
    bundle = SimpleNamespace(
        model=SimpleNamespace(config=config),
        manifest={"runtime": runtime},
        path="bundle",
        catalog=None,
        tokenizer=None,
        eos_token_ids=[2],
    )
    calls: list[dict] = []
    monkeypatch.setattr(serving_engine, "load", lambda options, tp: bundle)
    monkeypatch.setattr(serving_engine, "open_graph_rows", lambda *a: None)
    monkeypatch.setattr(
        serving_engine, "assemble_engine", lambda *a, **k: calls.append(k) or SimpleNamespace()
    )
    return calls


def test_the_grammar_compiler_and_the_vocabulary_reach_the_assembly(assembled):
    open_engine(ServeOptions("bundle", device="cpu"))
    (call,) = assembled
    assert call["vocab_size"] == VOCAB
    assert isinstance(call["grammar"], LazyGrammarCompiler)


def test_tensor_parallel_serving_assembles_a_grammar_compiler_that_refuses(assembled):
    open_engine(ServeOptions("bundle", device="cpu"), tp=SimpleNamespace(rank=0))
    with pytest.raises(GrammarError, match="not yet with tensor parallelism"):
        assembled[0]["grammar"].compile(GrammarSpec("regex", "a+", "response_format"))


def test_the_trace_recorder_and_the_fault_plan_reach_the_assembly(assembled):
    recorder, plan = TraceRecorder(), FaultPlan.parse("step=404")
    open_engine(ServeOptions("bundle", device="cpu"), trace=recorder, faults=plan)
    (call,) = assembled
    assert call["trace"] is recorder and call["faults"] is plan
