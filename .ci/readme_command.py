"""Print a quick-start command from README.md, so CI runs exactly what the README says.

The README marks each command with an HTML comment (`<!-- quickstart:test -->`)
followed by a fenced block holding one command line.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path


def main() -> int:
    name = sys.argv[1]
    text = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    match = re.search(rf"<!-- quickstart:{re.escape(name)} -->\s*```\w*\n(.+?)\n```", text, re.S)
    if not match:
        print(f"README.md: no quick-start block marked quickstart:{name}", file=sys.stderr)
        return 1
    lines = [line for line in match.group(1).splitlines() if line.strip()]
    if len(lines) != 1:
        print(f"README.md: quickstart:{name} must be exactly one command line", file=sys.stderr)
        return 1
    print(lines[0])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
