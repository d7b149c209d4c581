"""pytest setup for the doctests in workbench/engine and workbench/viz (not part of the package API)."""

import atexit
import os
import shutil
import tempfile

import numpy as np
import pytest

# Streamlit scripts run top to bottom when imported: never collect them, even for `pytest workbench`.
collect_ignore = ["app.py", "pages"]

# Same private cache as tests/conftest.py, for runs that collect only doctests.
_PREFIX = os.path.join(tempfile.gettempdir(), "alt-wb-test-")
if not os.environ.get("ALT_WORKBENCH_CACHE", "").startswith(_PREFIX):
    os.environ["ALT_WORKBENCH_CACHE"] = tempfile.mkdtemp(prefix=os.path.basename(_PREFIX))
    atexit.register(shutil.rmtree, os.environ["ALT_WORKBENCH_CACHE"], ignore_errors=True)


@pytest.fixture(autouse=True)
def _doctest_setup(doctest_namespace):
    """Doctests may use ``np`` without importing it, and start from a seeded np.random."""
    doctest_namespace["np"] = np
    np.random.seed(0)
