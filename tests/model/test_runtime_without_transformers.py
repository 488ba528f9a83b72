"""Issue 11: transformers is a test extra only; loading, building and serving never import it."""

from __future__ import annotations

import subprocess
import sys

RUNTIME_MODULES = (
    "ignition.model.families",
    "ignition.model.weights",
    "ignition.compiler.build",
    "ignition.runtime.bundle",
    "ignition.serving.forever",
    "ignition.cli",
)


def test_the_runtime_modules_do_not_import_transformers():
    code = (
        "import sys\n"
        + "".join(f"import {m}\n" for m in RUNTIME_MODULES)
        + "from ignition.model.families import families\n"
        + "families()\n"
        + "assert 'transformers' not in sys.modules, 'transformers was imported'\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
