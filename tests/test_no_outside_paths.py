"""The repository carries its own data: no script, test, doc or package file reads a path outside it."""

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
OUTSIDE = ("/work/shared", "../shared/data", "shared/data/azure")
SEARCHED = ("ignition", "scripts", "tests", "docs", "benchmarks", "examples", "README.md")


def _files():
    for top in SEARCHED:
        path = ROOT / top
        if path.is_file():
            yield path
            continue
        for file in path.rglob("*"):
            if file.suffix in {".py", ".md", ".sh", ".yaml", ".toml"} and file.name != Path(__file__).name:
                yield file


@pytest.mark.parametrize("needle", OUTSIDE)
def test_no_file_names_a_path_outside_the_repository(needle):
    hits = [str(f.relative_to(ROOT)) for f in _files() if needle in f.read_text(errors="replace")]
    assert hits == [], f"files reading {needle!r}: {hits}"


def test_the_azure_traces_ship_with_the_simulator():
    from ignition.simulate import traces

    for csv in (traces.CONV, traces.CODE):
        assert csv.stat().st_size > 100_000
        assert csv.read_text().splitlines()[0].startswith("TIMESTAMP")
