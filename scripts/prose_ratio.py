"""Prose / code of Python sources: docstring and comment lines over code lines.

Issue 41's measure of how much a reader wades through besides the code. A docstring line
is any line a module, class or function docstring spans; a comment line holds a comment
and no code (a trailing comment leaves its line code); a code line is any other
non-blank line.

    python scripts/prose_ratio.py                      # the package, one total line
    python scripts/prose_ratio.py ignition/server -v   # a folder or files, one line each
"""

from __future__ import annotations

import argparse
import ast
import io
import tokenize
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Count:
    docstring: int = 0
    comment: int = 0
    code: int = 0

    def add(self, other: Count) -> None:
        self.docstring += other.docstring
        self.comment += other.comment
        self.code += other.code

    def line(self, name: str) -> str:
        ratio = (self.docstring + self.comment) / max(self.code, 1)
        return (
            f"{name}: prose/code {ratio:.3f} (docstring {self.docstring}, "
            f"comment {self.comment}, code {self.code})"
        )


def docstring_lines(tree: ast.AST) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if (
                body
                and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)
            ):
                lines.update(range(body[0].lineno, body[0].end_lineno + 1))
    return lines


def count(path: Path) -> Count:
    text = path.read_text()
    docs = docstring_lines(ast.parse(text, str(path)))
    comments: set[int] = set()
    code: set[int] = set()
    skip = (tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER)
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type == tokenize.COMMENT:
            comments.add(token.start[0])
        elif token.type not in skip:
            code.update(range(token.start[0], token.end[0] + 1))
    code -= docs
    return Count(len(docs), len(comments - code - docs), len(code))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", default=[str(ROOT / "ignition")])
    parser.add_argument("-v", "--verbose", action="store_true", help="one line per file")
    args = parser.parse_args()
    total = Count()
    for given in args.paths:
        path = Path(given)
        for file in sorted(path.rglob("*.py")) if path.is_dir() else [path]:
            counted = count(file)
            total.add(counted)
            if args.verbose:
                print(counted.line(str(file)))
    print(total.line("total"))


if __name__ == "__main__":
    main()
