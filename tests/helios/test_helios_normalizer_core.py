"""Issue 14: the vectorised normalizers (helios/normalizer_core.py) are the Python
path's floats exactly, for every newcomer rule, catalog mix and stream count."""

from __future__ import annotations

import random

import pytest
from helios_helpers import decode, mixed, prefill, spec

from ignition.helios.decide.projection import measured
from ignition.helios.fast.normalizer_core import VECTOR_RULES, catalog_arrays, vector_normalizers
from ignition.helios.fast.projection import python_normalizers
from ignition.helios.state.cost import CostModel

POOL = (
    prefill(512),
    prefill(4096),
    decode(1),
    decode(8),
    decode(32),
    spec(4, 3),
    spec(16, 4),
    mixed(8, 256),
    mixed(32, 1024, 3),
)


def _python_path(descriptors, costs, num_live, num_decoders, families, rule):
    return python_normalizers(measured(descriptors, costs), num_live, num_decoders, families, rule)


@pytest.mark.parametrize("rule", VECTOR_RULES)
def test_vectorised_normalizers_equal_the_python_paths_bit_for_bit(rule):
    rng = random.Random(f"normalizers-{rule}")
    for _ in range(300):
        descriptors = tuple(rng.sample(POOL, rng.randint(0, len(POOL))))
        costs = CostModel(ttl_ns=10**12)
        for d in descriptors:
            if rng.random() < 0.8:  # some programs stay unmeasured
                costs.seed(d, rng.randint(1, 80_000_000))
        num_live = rng.randint(0, 70)
        num_decoders = rng.randint(0, num_live)
        split = rng.randint(0, num_decoders)
        families = {"ngram": split, "mtp": num_decoders - split} if rng.random() < 0.5 else {}
        families = {f: n for f, n in families.items() if n}
        got = vector_normalizers(
            catalog_arrays(descriptors, costs), num_live, num_decoders, families, rule
        )
        want = _python_path(descriptors, costs, num_live, num_decoders, families, rule)
        assert got == want
        assert got.by_family == want.by_family
