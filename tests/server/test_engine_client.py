"""The server calls only what :class:`EngineClient` declares, and the runtime's bridge and
the tests' scripted engine offer all of it, so the app reads the engine's vocabulary,
grammar compiler and chat renderer as typed members instead of probing for them."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import ignition.server
from ignition.runtime.async_engine import AsyncEngine
from ignition.server.engine_client import EngineClient
from tests.runtime.test_async_engine import async_engine
from tests.server.scripted import ScriptedEngine

SERVER = Path(ignition.server.__file__).parent


def members() -> set[str]:
    declared = set(EngineClient.__annotations__)
    return declared | {n for n, v in vars(EngineClient).items() if inspect.isfunction(v)}


def test_the_runtime_bridge_and_the_scripted_engine_offer_every_member():
    bridge, _ = async_engine()
    assert isinstance(bridge, AsyncEngine)
    assert sorted(m for m in members() if not hasattr(bridge, m)) == []
    assert sorted(m for m in members() if not hasattr(ScriptedEngine(), m)) == []


def test_the_server_never_probes_the_engine_with_getattr():
    probes = []
    for path in sorted(SERVER.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in ("getattr", "hasattr")
                and "engine" in ast.unparse(node.args[0])
            ):
                probes.append(f"{path.name}:{node.lineno} {ast.unparse(node)}")
    assert probes == []
