"""The protocol is the boundary: outside ignition/helios/ code imports only what
``ignition.helios`` exports, no scheduler is told apart by ``hasattr``, and the engine
serves (with preemption, resume and checkpoint retention) reading nothing of Helios but
what SchedulerProtocol declares."""

from __future__ import annotations

import ast
import functools
import pkgutil
from pathlib import Path

import ignition
import ignition.helios
from ignition.helios import SchedulerProtocol, helios_scheduler

ROOT = Path(ignition.__file__).parent
HELIOS = ROOT / "helios"
SUBMODULES = {m.name for m in pkgutil.iter_modules([str(HELIOS)])}
DECLARED = frozenset(name for name in vars(SchedulerProtocol) if not name.startswith("_"))


@functools.cache
def _outside_helios() -> tuple[tuple[Path, ast.Module], ...]:
    return tuple(
        (path, ast.parse(path.read_text(), str(path)))
        for path in sorted(ROOT.rglob("*.py"))
        if HELIOS not in path.parents
    )


def _reaches_into_helios(node: ast.AST) -> str | None:
    if isinstance(node, ast.Import):
        for alias in node.names:
            if alias.name.startswith("ignition.helios."):
                return alias.name
    if isinstance(node, ast.ImportFrom) and node.module is not None:
        if node.module.startswith("ignition.helios."):
            return node.module
        if node.module == "ignition.helios":
            inner = [alias.name for alias in node.names if alias.name in SUBMODULES]
            return f"ignition.helios.{inner[0]}" if inner else None
    return None


def test_code_outside_helios_imports_only_what_ignition_helios_exports():
    found = [
        f"{path.relative_to(ROOT.parent)}:{node.lineno}: {module}"
        for path, tree in _outside_helios()
        for node in ast.walk(tree)
        if (module := _reaches_into_helios(node)) is not None
    ]
    assert found == []


def test_every_name_imported_from_ignition_helios_is_exported():
    imported = {
        alias.name
        for _, tree in _outside_helios()
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module == "ignition.helios"
        for alias in node.names
    }
    assert imported <= set(ignition.helios.__all__)


def test_no_scheduler_is_told_apart_by_its_attributes():
    found = []
    for path, tree in _outside_helios():
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in ("hasattr", "getattr")
                and node.args
                and any(word in ast.unparse(node.args[0]) for word in ("scheduler", "helios"))
            ):
                found.append(f"{path.relative_to(ROOT.parent)}:{node.lineno}")
    assert found == []


MAX_TOKENS = 12


class ProtocolOnly:
    """A scheduler seen only through SchedulerProtocol: any other attribute the runtime
    asks for raises AttributeError and is recorded (so a ``getattr`` with a default that
    swallows the error still fails the test)."""

    def __init__(self, inner: object) -> None:
        self._inner = inner
        self.undeclared: list[str] = []
        self.asked: set[str] = set()

    def __getattr__(self, name: str):
        if name not in DECLARED:
            self.undeclared.append(name)
            raise AttributeError(f"{name!r} is not declared on SchedulerProtocol")
        self.asked.add(name)
        return getattr(self._inner, name)


def test_the_engine_preempts_resumes_and_retains_through_the_protocol_alone():
    """The tiny runtime of tests/runtime/test_preemption.py (imported here only: the other
    tests of this module need no torch)."""
    from ignition.kernels.dispatch import use_backend
    from ignition.runtime.assembly import RuntimeOptions, assemble_engine
    from ignition.runtime.requests.request import GenerationRequest, SamplingParams
    from tests.runtime.tiny import EOS, CharDecoder, tiny_catalog, tiny_model

    proxies: list[ProtocolOnly] = []

    def factory(*args):
        proxies.append(ProtocolOnly(helios_scheduler(*args)))
        return proxies[-1]

    # Six pages of 16 tokens for three requests reaching 33, 38 and 43 tokens (three pages
    # each): one of them must give way, and its snapshot row lets it resume by restore.
    options = RuntimeOptions(
        num_slots=4, page_size=16, max_context_tokens=256, snapshot_rows=4, num_pages=6
    )
    model, catalog = tiny_model(), tiny_catalog()
    with use_backend("reference"):
        engine = assemble_engine(
            model, catalog, CharDecoder(), [EOS], options, scheduler_factory=factory
        )
    finishes = {}
    for i in range(3):
        prompt = tuple((7 * i + 5 * j) % 100 + 4 for j in range(20 + 5 * i))

        def sink(chunk, name=f"r{i}"):
            if chunk.finish_reason:
                finishes[name] = chunk.finish_reason

        sampling = SamplingParams(max_tokens=MAX_TOKENS, temperature=0.0, ignore_eos=True)
        engine.submit(GenerationRequest(f"r{i}", prompt, sampling), sink)
    with use_backend("reference"):
        engine.run_until_idle(max_steps=20_000)
    (proxy,) = proxies
    assert proxy.undeclared == []
    assert finishes == {"r0": "length", "r1": "length", "r2": "length"}
    assert engine.stats.snapshot().preemptions >= 1
    assert {"preemption_victim", "preempt", "can_resume", "cost_estimate"} <= proxy.asked
