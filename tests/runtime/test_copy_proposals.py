"""Copy proposals: the continuation of the longest recurring suffix n-gram."""

from __future__ import annotations

import pytest

from ignition.runtime.proposals.copy_proposals import copy_proposal


def test_the_continuation_of_the_suffix_found_earlier_is_proposed():
    assert copy_proposal([1, 2, 3, 4, 5, 9, 2, 3], 3) == (4, 5, 9)


def test_the_longest_recurring_suffix_wins_over_a_later_shorter_one():
    # [7, 2, 3] recurs at the start; the shorter [2, 3] recurs later with another follower
    assert copy_proposal([7, 2, 3, 4, 2, 3, 6, 7, 2, 3], 1, max_ngram=3) == (4,)


def test_among_equal_matches_the_latest_occurrence_is_proposed():
    assert copy_proposal([2, 3, 4, 2, 3, 5, 2, 3], 1) == (5,)


def test_no_recurring_suffix_proposes_nothing():
    assert copy_proposal([1, 2, 3, 4, 5], 4) == ()
    assert copy_proposal([1, 2, 3, 1, 9], 4) == ()  # one token recurs: below min_ngram


def test_the_proposal_is_bounded_by_max_tokens_and_the_window():
    context = [1, 2, 3, 4, 5, 6, 1, 2]
    assert copy_proposal(context, 2) == (3, 4)
    assert copy_proposal(context, 2, window=4) == ()  # the earlier [1, 2] is out of reach


def test_a_bad_ngram_range_is_an_error_naming_it():
    with pytest.raises(ValueError, match="min_ngram=3 max_ngram=2"):
        copy_proposal([1, 2], 1, max_ngram=2, min_ngram=3)
