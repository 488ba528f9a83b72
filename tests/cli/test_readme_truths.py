"""Issue 38, 3.11: what the README says about paths and recipes is what the repository and
``ignition recipes`` hold: every path it names lies inside the repository, the bundle folders
its commands use are the ones the build writes, and what it says of qwen38's vision programs
is what the recipe lists."""

from __future__ import annotations

import json
import re
from pathlib import Path

from click.testing import CliRunner

from ignition.cli import main
from ignition.recipes import list_recipes

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
CARD = (ROOT / "ignition" / "assets" / "qwen38-tiny" / "README.md").read_text()


def test_every_repository_path_the_readme_names_exists():
    top = "docs|ignition|tests|scripts|benchmarks|examples"
    named = set(re.findall(rf"`((?:{top})/[^`\s]*)`", README))
    named |= set(re.findall(r"\]\(((?:docs|ignition|tests|scripts)/[^)\s]*)\)", README))
    missing = sorted(p for p in named if "<" not in p and not (ROOT / p.rstrip("/")).exists())
    assert missing == []


def test_the_layout_points_at_the_house_plan_inside_the_repository():
    layout = README.split("\n## Layout\n", 1)[1]
    assert "docs/architecture.md" in layout.split("\n\n", 1)[0]
    assert (ROOT / "docs" / "architecture.md").read_text().count("## Rooms") == 1
    assert "shared folder" not in layout


def test_the_model_card_names_no_path_outside_the_repository():
    assert "shared/spec" not in CARD
    assert "ignition/model/families/qwen4_exp.py" in CARD


def test_every_bundle_folder_the_readme_serves_is_one_a_build_writes():
    """A build writes artifacts/<recipe name> unless --out names the folder."""
    written = {r.name for r in list_recipes()}
    written |= set(re.findall(r"--out artifacts/([\w.-]+)", README))
    used = set(re.findall(r"artifacts/([\w.-]+)", README))
    assert used - written == set()


def test_what_the_readme_says_of_qwen38s_vision_programs_is_what_recipes_lists():
    rows = json.loads(CliRunner().invoke(main, ["recipes", "--json"]).output)
    by_name = {row["name"]: row for row in rows}
    assert by_name["qwen38"]["vision_patch_capacities"] == []
    assert "qwen38 declares none" in README
    assert by_name["qwen35"]["vision_patch_capacities"] == [256, 1024, 4096]
    assert "qwen35 / qwen35-moe declare 256, 1024 and 4096 patches" in README
    table = CliRunner().invoke(main, ["recipes"]).output
    qwen38 = table[table.index("│ qwen38 ") :]
    assert "no vision" in " ".join(qwen38.split())
