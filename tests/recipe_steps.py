"""The qwen38 recipe written to a temporary file with other concurrency steps (and any other
capacity keys): what the recipe-step tests load and check."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from ignition.recipes.registry import RECIPES_DIR


def qwen38_with_steps(tmp_path: Path, steps: Any, **capacity: Any) -> Path:
    data = yaml.safe_load((RECIPES_DIR / "qwen38" / "recipe.yaml").read_text())
    data["capacity"]["concurrency_defaults"] = steps
    data["capacity"].update(capacity)
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(data))
    return path
