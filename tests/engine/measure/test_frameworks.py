"""The frameworks' sidecar, started from an app's script, and the error their makers check
(the makers run in it in tests/engine/session/test_network_time.py)."""

import os
import sys
import types

import numpy as np
import pytest

from tests.engine.session import timer_makers
from workbench.engine.base.errors import BuildError
from workbench.engine.measure.frameworks import relative_error
from workbench.engine.measure.library import Sidecar


def test_the_error_is_the_largest_over_outputs_each_relative_to_its_reference():
    want = {"y": np.array([[2.0, -4.0]], np.float32), "z": np.array([100.0], np.float32)}
    # y: 0.2 off where its largest magnitude is 4; z: 1 off of 100; the flat output takes y's shape
    assert relative_error([np.array([2.2, -4.0]), np.array([99.0])], want) == pytest.approx(0.05)
    assert relative_error([want["y"], want["z"]], want) == 0


def test_a_framework_with_another_number_of_outputs_is_refused():
    with pytest.raises(BuildError, match="1 outputs where the model has 2"):
        relative_error([np.zeros(2)], {"y": np.zeros(2), "z": np.zeros(1)})


def test_the_sidecar_does_not_run_the_apps_script_again(tmp_path, monkeypatch):
    """Streamlit's ``__main__`` is the app's script (a file, no spec): the sidecar must not run it."""
    script = tmp_path / "app.py"
    script.write_text(f"open({str(tmp_path / 'ran')!r}, 'w').write('the app ran again')\n")
    app = types.ModuleType("__main__")
    app.__file__ = str(script)
    monkeypatch.setitem(sys.modules, "__main__", app)
    with Sidecar() as side:
        assert sys.modules["__main__"] is app
        side.timer(timer_makers.pid_timer, str(tmp_path / "pid"))
    assert int((tmp_path / "pid").read_text()) != os.getpid() and not (tmp_path / "ran").exists()
