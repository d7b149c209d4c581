"""Export -> plain TVM (nothing from this project imported) applies the records -> same numbers."""

import json
import subprocess
import sys
import textwrap

import numpy as np

from workbench.engine.export import export_session
from workbench.engine.lower import stored_constants
from workbench.engine.session import new_session, replay

PLAIN_TVM = textwrap.dedent('''
    import json, sys
    import numpy as np
    import tvm
    import tvm.s_tir.meta_schedule as ms
    assert not any(m.startswith("workbench") for m in sys.modules)
    out = sys.argv[1]
    manifest = json.load(open(f"{out}/manifest.json"))
    target = tvm.target.Target(manifest["target"])
    db = ms.database.JSONDatabase(f"{out}/database_workload.json", f"{out}/database_tuning_record.json")
    mods = {str(r.workload.mod["main"].attrs["global_symbol"]): r.workload.mod for r in db.get_all_tuning_records()}
    bufs = {name: np.load(f"{out}/in_{name}.npy") for name in json.load(open(f"{out}/inputs.json"))}
    for k in manifest["kernels"]:
        sch = ms.tir_integration.compile_tir(db, mods[k["name"]], target)
        lib = tvm.compile(sch.mod, target=target)
        args = [tvm.runtime.tensor(bufs[b], tvm.cpu()) for b in k["inputs"]]
        args += [tvm.runtime.tensor(np.zeros(k["buffers"][b]["shape"], "float32"), tvm.cpu()) for b in k["outputs"]]
        lib[k["name"]](*args)
        bufs.update({b: a.numpy() for b, a in zip(k["outputs"], args[len(k["inputs"]):])})
    for t, b in manifest["outputs"].items():
        np.save(f"{out}/out_{t}.npy", bufs[b])
''')


def test_plain_tvm_applies_the_exported_records(tmp_path):
    s = new_session("gmm", name="g", m=64, n=64, k=64)
    s = s.push({"kind": "layout", "tensor": "gmm", "preset": "nkn", "params": {"m": 16, "n": 16}})
    for loops, prim in ((["i0", "i1", "rk", "i2", "i3"], "reorder"),):
        s = s.push({"kind": "loop", "op": "gmm", "primitive": prim, "args": {"block": "gmm", "loops": loops}})
    s = s.push({"kind": "loop", "op": "gmm", "primitive": "vectorize", "args": {"block": "gmm", "loop": "i3"}})
    out = export_session(s, tmp_path / "export")
    records = (out / "database_tuning_record.json").read_text().splitlines()
    assert len(records) == 3 and "Vectorize" in "".join(records)
    assert json.loads((out / "manifest.json").read_text())["tvm_version"]

    plan = replay(s).program.plan
    rng = np.random.default_rng(0)
    values = {"a": rng.uniform(-1, 1, (64, 64)).astype("float32"),
              "gmm.weight": rng.uniform(-1, 1, (64, 64)).astype("float32")}
    given = {"a": values["a"], **stored_constants(plan, values)}  # weights converted ahead of time
    for name, arr in given.items():
        np.save(out / f"in_{name}.npy", arr)
    (out / "inputs.json").write_text(json.dumps(list(given)))
    res = subprocess.run([sys.executable, "-c", PLAIN_TVM, str(out)], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    got = np.load(out / "out_gmm.npy")
    np.testing.assert_allclose(got, values["a"].astype(np.float64) @ values["gmm.weight"], rtol=1e-4, atol=1e-4)
