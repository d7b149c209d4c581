"""Export -> plain TVM (nothing from this project imported) applies the records -> same numbers."""

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from workbench.engine.session.export import export_session
from workbench.engine.loops.primitives import apply_steps, basic_schedule, trace_json
from workbench.engine.build.lower import stored_constants
from workbench.engine.build.targets import resolve_target
from workbench.engine.session.session import load, new_session, replay
from workbench.engine.base.step import Step

SESSIONS = Path(__file__).resolve().parents[3] / "sessions"

# Runs in a fresh interpreter with tvm and numpy only: the database is all it gets, plus the
# manifest (to wire the kernels) and the inputs; it writes the outputs and the applied schedules.
PLAIN_TVM = textwrap.dedent('''
    import json, sys
    import numpy as np
    import tvm
    import tvm_ffi
    import tvm.s_tir.meta_schedule as ms
    assert not any(m.startswith("workbench") for m in sys.modules)
    out = sys.argv[1]
    manifest = json.load(open(f"{out}/manifest.json"))
    target = tvm.target.Target(manifest["target"])
    db = ms.database.JSONDatabase(f"{out}/database_workload.json", f"{out}/database_tuning_record.json")
    workloads = {str(tvm_ffi.structural_hash(r.workload.mod)): r.workload.mod for r in db.get_all_tuning_records()}
    bufs = {name: np.load(f"{out}/in_{name}.npy") for name in json.load(open(f"{out}/inputs.json"))}
    scripts = {}
    for k in manifest["kernels"]:
        mod = workloads[k["workload_hash"]]
        sch = ms.tir_integration.compile_tir(db, mod, target)
        assert sch is not None, k["name"]
        scripts[k["name"]] = sch.mod["main"].script()
        lib = tvm.compile(sch.mod, target=target)
        args = [tvm.runtime.tensor(bufs[b], tvm.cpu()) for b in k["inputs"]]
        args += [tvm.runtime.tensor(np.zeros(k["buffers"][b]["shape"], "float32"), tvm.cpu()) for b in k["outputs"]]
        lib["main"](*args)
        bufs.update({b: a.numpy() for b, a in zip(k["outputs"], args[len(k["inputs"]):])})
    for t, b in manifest["outputs"].items():
        np.save(f"{out}/out_{t}.npy", bufs[b])
    json.dump(scripts, open(f"{out}/scripts.json", "w"))
''')


def _gmm_tuned():
    """A small NKn GMM whose gmm kernel carries a tuned trace (as a tuning result would)."""
    st = replay(new_session("gmm", name="g", m=64, n=64, k=64)).push(Step.make("preset", "gmm", "nkn", m=16, n=16))
    func = st.program.funcs["gmm"]
    trace = trace_json(apply_steps(func, basic_schedule(func)))
    return st.push(Step.make("tuned", "gmm", "tuned", trace=trace, latency_ms=1.0)).session


def _body(script: str) -> list[str]:
    """A function's script without its name and attributes (the symbol differs: main vs kernel)."""
    return [ln for ln in script.splitlines() if "def " not in ln and "T.func_attr" not in ln]


CASES = {
    "hand_alt_tiled": lambda: load(SESSIONS / "r18_stem_alt_tiled.json"),
    "tuned_gmm": _gmm_tuned,
}


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(CASES))
def test_plain_tvm_applies_the_exported_records(case, tmp_path):
    s = CASES[case]()
    out = export_session(s, tmp_path / "export")
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["tvm_version"] and manifest["session_target"] == s.target
    assert manifest["target"] == resolve_target(s.target) and "mcpu" in manifest["target"]
    state = replay(s)
    plan = state.program.plan
    assert [k["name"] for k in manifest["kernels"]] == [k.name for k in plan.kernels]
    records = (out / "database_tuning_record.json").read_text().splitlines()
    workloads = (out / "database_workload.json").read_text().splitlines()
    assert len(records) == len(workloads) == len(plan.kernels)  # one workload and one record per kernel
    kinds = {k["name"]: k["schedule"] for k in manifest["kernels"]}
    last = {step.target: {"loop": "loop steps", "tuned": "tuned"}[step.kind] for step in s.steps
            if step.kind in ("loop", "tuned")}  # these sessions set their layouts before any schedule
    # a stand-alone conversion the session does not schedule runs on its analytic schedule
    assert kinds == {k.name: last.get(k.name, "conversion" if k.conversion else "default") for k in plan.kernels}

    # inputs and the expected outputs, computed here beforehand (weights converted ahead of time)
    values = plan.graph.random_inputs(1)
    given = {b.name: values[b.tensor] for b in plan.buffers.values() if b.source == "input"}
    given.update(stored_constants(plan, values))
    for name, arr in given.items():
        np.save(out / f"in_{name}.npy", np.ascontiguousarray(arr, dtype="float32"))
    (out / "inputs.json").write_text(json.dumps(list(given)))
    if case == "tuned_gmm":
        expected = {"gmm": values["a"].astype(np.float64) @ values["gmm.weight"].astype(np.float64)}
    else:
        expected = {t: v for t, v in plan.graph.reference(values).items() if t in plan.outputs}

    res = subprocess.run([sys.executable, "-c", PLAIN_TVM, str(out)], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    for t, ref in expected.items():
        np.testing.assert_allclose(np.load(out / f"out_{t}.npy"), ref, rtol=1e-4, atol=1e-4 * np.abs(ref).max())

    # the schedules plain TVM applied are the session's
    scripts = json.loads((out / "scripts.json").read_text())
    for k in plan.kernels:
        assert _body(scripts[k.name]) == _body(state.scheduled_func(k.name).script()), k.name
    main = "conv" if case == "hand_alt_tiled" else "gmm"
    assert "T.parallel" in scripts[main] and "T.vectorized" in scripts[main]


def test_export_of_a_bad_session_writes_nothing(tmp_path):
    from workbench.engine.base.errors import SessionError
    from workbench.engine.session.session import Session

    bad = Session("bad", model={"zoo": "gmm", "m": 64, "n": 64, "k": 64},
                  steps=(Step.make("loop", "nope", "parallel", block="x", loop="i0"),))
    with pytest.raises(SessionError, match=r"action 0 \(loop on 'nope'\)"):
        export_session(bad, tmp_path / "export")
    assert not (tmp_path / "export").exists()
