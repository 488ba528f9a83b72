"""``serve --data-parallel-size``'s flags fail before any build or load, in one line."""

from __future__ import annotations

import sys

from click.testing import CliRunner

from ignition.cli import main


def _serve(*args: str):
    return CliRunner().invoke(main, ["serve", "/nonexistent-bundle", *args])


def test_a_replica_count_below_one_is_named():
    result = _serve("--data-parallel-size", "0")
    assert result.exit_code == 2 and "--data-parallel-size = 0: must be at least 1" in result.output


def test_a_negative_imbalance_bound_is_named():
    result = _serve("-dp", "2", "--max-imbalance", "-1")
    assert result.exit_code == 2 and "--max-imbalance = -1: must be at least 0" in result.output


def test_tensor_parallel_replicas_are_refused_before_any_load():
    result = _serve("-dp", "2", "-tp", "2")
    assert result.exit_code == 2
    assert "tensor-parallel replicas are not supported yet" in result.output


def test_without_ray_the_error_names_the_install_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray raises ImportError
    result = _serve("-dp", "2")
    assert result.exit_code == 2 and "pip install 'ignition[replicas]'" in result.output
