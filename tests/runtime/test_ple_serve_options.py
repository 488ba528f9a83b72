"""Issue 23: `ignition serve` keeps the PLE options the bundle was built with (its manifest's
``ple`` entry: residency, preload, row-cache bound); each flag serve names wins."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
import torch
from click.testing import CliRunner

from ignition.cli import main
from ignition.runtime.bundle import BundleError
from ignition.runtime.ple.delivery import PleOptions
from ignition.runtime.ple.table import TABLE_FOLDER, write_table
from ignition.serving.engine import ServeOptions
from ignition.serving.ple import open_table, serve_ple_options

CPU = torch.device("cpu")
BUILT = {"table": "n-gram", "residency": "disk", "preload": True, "cache_bytes": 64}


@pytest.fixture
def served(monkeypatch):
    """`serve` run up to the point where it would load: the ServeOptions it would serve."""
    import ignition.cli.serve_common
    import ignition.serving.forever

    seen: list[ServeOptions] = []
    # The default port may be taken on the machine running the suite; the port check has its own tests.
    monkeypatch.setattr(ignition.cli.serve_common, "check_port_free", lambda host, port: None)
    monkeypatch.setattr(
        ignition.serving.forever, "serve_forever", lambda o, *a, **k: seen.append(o)
    )
    return seen


@pytest.fixture
def bundle(tmp_path):
    """A bundle folder whose manifest says how its table was built; the table beside it."""
    write_table(tmp_path / TABLE_FOLDER, [torch.zeros(8, 4), torch.ones(8, 4)])  # 256 bytes
    manifest = {"checkpoint": {"path": str(tmp_path)}, "ple": BUILT}
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    return SimpleNamespace(manifest=manifest, path=tmp_path, model=None)


def test_serve_leaves_every_ple_flag_it_was_not_given_unset(served, bundle):
    assert CliRunner().invoke(main, ["serve", str(bundle.path)]).exit_code == 0
    assert served[0].ple == PleOptions(None, None, None)


def test_serve_passes_the_ple_flags_it_was_given(served, bundle):
    flags = ["--ple-residency", "host", "--no-ple-preload", "--ple-cache-bytes", "2MiB"]
    result = CliRunner().invoke(main, ["serve", str(bundle.path), *flags])
    assert result.exit_code == 0, result.output
    assert served[0].ple == PleOptions("host", False, 2 << 20)


def test_unnamed_ple_options_are_the_builds():
    assert serve_ple_options(PleOptions(), BUILT) == PleOptions("disk", True, 64)


def test_each_named_ple_option_wins_over_the_builds():
    assert serve_ple_options(PleOptions(cache_bytes=32), BUILT) == PleOptions("disk", True, 32)
    assert serve_ple_options(PleOptions(preload=False), BUILT) == PleOptions("disk", False, 64)
    assert serve_ple_options(PleOptions("host"), BUILT) == PleOptions("host", True, 64)


def test_the_served_row_cache_has_the_builds_bound(bundle):
    ple = open_table(bundle, PleOptions(), CPU)
    assert ple.residency == "disk" and ple.store.cache.capacity_bytes == 64
    assert open_table(bundle, PleOptions(cache_bytes=32), CPU).store.cache.capacity_bytes == 32


def test_the_served_host_table_is_preloaded_as_built_unless_serve_says_no(bundle):
    bundle.manifest["ple"] = {**BUILT, "residency": "host"}
    preloaded = open_table(bundle, PleOptions(), CPU)
    assert len(preloaded.store.pieces) == 1  # the two mapped shards, copied into one
    assert len(open_table(bundle, PleOptions(preload=False), CPU).store.pieces) == 2


def test_a_bad_built_ple_value_is_one_line_naming_the_manifest_key():
    with pytest.raises(BundleError, match=r"bundle/manifest.json: ple.cache_bytes = 'lots'"):
        serve_ple_options(PleOptions(), {**BUILT, "cache_bytes": "lots"}, "bundle/manifest.json")
