"""Fixtures over the shared tiny runtime (``tiny.py``).

They are not autouse: a test module that runs the reference kernels says so with
``pytestmark = pytest.mark.usefixtures("reference_kernels")``, and one that needs a
different model or prefill chunk defines its own ``model`` or ``catalog``.
"""

from __future__ import annotations

import pytest

from ignition.kernels.dispatch import use_backend
from tests.runtime.tiny import tiny_catalog, tiny_model


@pytest.fixture(scope="module")
def model():
    return tiny_model()


@pytest.fixture(scope="module")
def catalog():
    return tiny_catalog()


@pytest.fixture
def reference_kernels():
    with use_backend("reference"):
        yield
