"""No source file in the package over 400 lines: a file that grows past it has more than
one job and is split (issue 41)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "ignition"
MAX_LINES = 400


def test_no_file_in_the_package_exceeds_the_line_limit():
    too_long = {
        str(path.relative_to(ROOT.parent)): n
        for path in sorted(ROOT.rglob("*.py"))
        if (n := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert too_long == {}, f"files over {MAX_LINES} lines: {too_long}"
