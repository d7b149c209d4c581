"""Shared test setup: a private cache folder, seeded randomness, Hypothesis settings."""

import atexit
import os
import random
import shutil
import tempfile

import numpy as np
import pytest
from hypothesis import settings

# Before any workbench import: the run writes its cache (machine ceilings, ...) into one temporary
# folder, never ~/.cache. workbench/conftest.py does the same for doctest-only runs.
_PREFIX = os.path.join(tempfile.gettempdir(), "alt-wb-test-")
if not os.environ.get("ALT_WORKBENCH_CACHE", "").startswith(_PREFIX):
    os.environ["ALT_WORKBENCH_CACHE"] = tempfile.mkdtemp(prefix=os.path.basename(_PREFIX))
    atexit.register(shutil.rmtree, os.environ["ALT_WORKBENCH_CACHE"], ignore_errors=True)

# Building a TVM kernel can take seconds on a 2-core machine: no per-example deadline.
settings.register_profile("workbench", deadline=None, print_blob=True)
settings.load_profile("workbench")

SEED = 0


@pytest.fixture(autouse=True)
def _seeded():
    """Every test starts from the same global random state (random and legacy np.random)."""
    random.seed(SEED)
    np.random.seed(SEED)


@pytest.fixture
def rng() -> np.random.Generator:
    """A fresh, seeded NumPy generator: prefer it to the global np.random."""
    return np.random.default_rng(SEED)
