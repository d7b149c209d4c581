"""Importing the engine patches nothing global; the tuning start-up is explicit and scoped.

Each probe runs in a fresh interpreter: it snapshots the process-wide state (after importing TVM,
whose own import hooks ``sys.excepthook`` and ``sys.meta_path``), imports modules, then reports
what differs from the snapshot."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from workbench.engine.tuning import startup

ROOT = Path(__file__).resolve().parents[3]
ENGINE = ROOT / "workbench" / "engine"

PROBE = r'''
import importlib, inspect, json, os, pkgutil, signal, sys, threading
import tvm  # third-party: its own hooks are not ours to judge

def snapshot():
    return {"inspect.stack": inspect.stack, "sys.path": list(sys.path), "os.environ": dict(os.environ),
            "cwd": os.getcwd(), "sys.excepthook": sys.excepthook, "threading.excepthook": threading.excepthook,
            "sys.meta_path": list(sys.meta_path), "sys.path_hooks": list(sys.path_hooks),
            "signals": [signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGCHLD)]}

def changed(before):
    after = snapshot()
    return sorted(k for k in before if after[k] != before[k])

before = snapshot()
names = []
for spec in sys.argv[1].split(","):
    if spec.endswith(".*"):  # a package and every module under it
        pkg = importlib.import_module(spec[:-2])
        names += [pkg.__name__] + [m.name for m in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + ".")]
    else:
        names.append(spec)
for name in names:
    importlib.import_module(name)
report = {"modules": names, "on_import": changed(before),
          "intrinsics_on_import": "tvm.s_tir.tensor_intrin" in sys.modules}
exec(sys.argv[2])  # what the test does next
report["after"] = changed(before)
report["intrinsics_after"] = "tvm.s_tir.tensor_intrin" in sys.modules
print(json.dumps(report))
'''


def probe(modules: str, then: str = "pass") -> dict:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # so a change to it shows
    out = subprocess.run([sys.executable, "-c", PROBE, modules, then], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_importing_every_engine_module_patches_nothing_and_the_start_up_restores_what_it_swaps():
    """Also runs the explicit start-up afterwards: the intrinsics get imported, and inspect.stack
    and PYTHONPATH are as they were once the scoped swaps are over."""
    then = ("from workbench.engine.tuning.startup import children_import_workbench, import_tensor_intrinsics\n"
            "import_tensor_intrinsics()\n"
            "with children_import_workbench():\n"
            "    pass\n")
    report = probe("workbench.engine.*", then)
    expected = {"workbench.engine." + p.relative_to(ENGINE).with_suffix("").as_posix().replace("/", ".")
                for p in ENGINE.rglob("*.py") if p.name != "__init__.py"}
    assert expected <= set(report["modules"]) and "workbench.engine.tuning.jobs.worker" in expected
    assert report["on_import"] == [] and not report["intrinsics_on_import"]
    assert report["after"] == [] and report["intrinsics_after"]


def test_the_probe_sees_a_swap_left_in_place():
    """The check above can fail: a stack swap or PYTHONPATH change left behind is reported."""
    then = ("from workbench.engine.tuning import startup\n"
            "left = [startup.light_stack(), startup.children_import_workbench()]  # kept: never exited\n"
            "for scope in left:\n"
            "    scope.__enter__()\n")
    report = probe("workbench.engine.tuning.startup", then)
    assert report["on_import"] == [] and report["after"] == ["inspect.stack", "os.environ"]


@pytest.mark.parametrize("before", [None, "/elsewhere", str(startup.REPO_ROOT)])
def test_children_import_workbench_is_scoped(monkeypatch, before):
    if before is None:
        monkeypatch.delenv("PYTHONPATH", raising=False)
    else:
        monkeypatch.setenv("PYTHONPATH", before)
    with startup.children_import_workbench():
        assert str(startup.REPO_ROOT) in os.environ["PYTHONPATH"].split(os.pathsep)
    assert os.environ.get("PYTHONPATH") == before


def test_light_stack_restores_the_real_one_after_an_error():
    import inspect

    real = inspect.stack
    with pytest.raises(RuntimeError), startup.light_stack():
        assert inspect.stack is not real and inspect.stack()[0].function.startswith("test_light_stack")
        raise RuntimeError
    assert inspect.stack is real
