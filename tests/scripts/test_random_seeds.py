"""The seed lists a multi-seed comparison runs (``random_seeds.py``,
``objective_rules.py --conv ... --seeds``)."""

from __future__ import annotations

import argparse

import pytest

from scripts.scheduling_sim.random_seeds import seed_list


def test_seeds_take_lists_and_inclusive_ranges():
    assert seed_list("0,1,2,3") == [0, 1, 2, 3]
    assert seed_list("0-3") == [0, 1, 2, 3]
    assert seed_list("5, 8-10") == [5, 8, 9, 10]


@pytest.mark.parametrize("text", ["", "a", "0-b", "3-1"])
def test_a_seed_list_without_seeds_is_refused_by_name(text):
    with pytest.raises(argparse.ArgumentTypeError, match="--seeds"):
        seed_list(text)


def test_the_conversation_search_refuses_a_bad_seed_list(capsys):
    from scripts.scheduling_sim.objective_rules import main

    assert main(["--conv", "qwen38-flash-next-4xh100", "helios", "--seeds", "x"]) == 2
    assert "--seeds 'x'" in capsys.readouterr().err
