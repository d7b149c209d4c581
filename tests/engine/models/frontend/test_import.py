"""Importing real models (``workbench.engine.models.frontend``): the built-in networks against PyTorch,
ONNX and torch.export files made here from small torch modules against PyTorch and onnxruntime,
sessions pinned to a model file, uploads, and a corpus of bad model files (generated here, none
committed) each refused with one line naming the problem."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from torch import nn  # noqa: E402
from torch.nn import functional as F  # noqa: E402

from workbench.engine.models import networks, zoo  # noqa: E402
from workbench.engine.base.errors import GraphError, SessionError  # noqa: E402
from workbench.engine.models.frontend import MAX_MODEL_MB, check_upload, export_factory, import_file, parse_input  # noqa: E402
from workbench.engine.models.frontend.framework import framework_of, framework_outputs  # noqa: E402
from workbench.engine.build.program import make_program  # noqa: E402
from workbench.engine.session.artifacts import replay_to  # noqa: E402
from workbench.engine.session.session import dumps, loads, new_session, replay, save  # noqa: E402

# the tests make ONNX files with both of torch's exporters, the legacy one on purpose
pytestmark = pytest.mark.filterwarnings("ignore:You are using the legacy TorchScript-based ONNX export",
                                        "ignore::FutureWarning")


def run_graph(graph, x: np.ndarray) -> np.ndarray:
    """The engine's whole program on input ``x`` (the model's own weights): its one output."""
    values = graph.random_inputs(0)
    values[graph.inputs[0]] = x
    return make_program(graph).build().run(values)[graph.outputs[0]]


def assert_close(got: np.ndarray, want: np.ndarray, rtol: float = 1e-4) -> None:
    assert got.shape == want.shape
    assert np.abs(want).max() > 1e-3  # a real signal, not zeros
    err = np.abs(got.astype(np.float64) - want).max() / np.abs(want).max()
    assert err < rtol, err


def torch_out(module: nn.Module, *xs: np.ndarray) -> np.ndarray | list[np.ndarray]:
    """The module's output on ``xs``; several outputs as a list."""
    with torch.no_grad():
        out = module(*map(torch.from_numpy, xs))
    return [o.numpy() for o in out] if isinstance(out, tuple) else out.numpy()


def random_input(shape, seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-1, 1, shape).astype("float32")


########## Built-in networks ##########

@pytest.mark.slow  # 10-30 s each: whole networks, imported, built and run
@pytest.mark.parametrize("name", ["resnet18", "mobilenet_v2", "bert_layer"])
def test_a_builtin_network_computes_what_pytorch_computes(name):
    graph = zoo.load(name)
    module, (example,) = getattr(networks, name)()
    x = random_input(example.shape)
    assert_close(run_graph(graph, x), torch_out(module, x))
    # the op library's references agree too (what Built.verify compares against)
    values = {**graph.random_inputs(0), graph.inputs[0]: x}
    assert_close(graph.reference(values)[graph.outputs[0]], torch_out(module, x))


@pytest.mark.parametrize("name, expected", [
    ("resnet18", {"C2D": 20, "bias_add": 21, "relu": 17, "add": 8, "pool2d": 2, "GMM": 1, "reshape": 1}),
    ("mobilenet_v2", {"C2D": 35, "DEP": 17, "bias_add": 53, "relu6": 35, "add": 10, "pool2d": 1, "GMM": 1,
                      "reshape": 1}),
    ("bert_layer", {"GMM": 8, "bias_add": 6, "reshape": 4, "transpose": 4, "add": 2, "layer_norm": 2, "scale": 1,
                    "softmax": 1, "gelu": 1}),
])
@pytest.mark.slow
def test_a_builtin_network_has_the_documented_ops(name, expected):
    graph = zoo.load(name)
    assert Counter(n.label for n in graph.nodes) == expected
    assert graph.inputs == ["data"] and len(graph.outputs) == 1
    for t in graph.constants:  # every weight is the model's own, named after the op reading it
        assert t in graph.values and t.rpartition(".")[0] in {n.name for n in graph.consumers(t)}


def test_networks_are_imported_once_and_their_weights_are_read_only():
    assert zoo.load("resnet18") is zoo.load("resnet18")
    w = zoo.load("resnet18").values["conv1.weight"]
    with pytest.raises(ValueError):
        w[0, 0, 0, 0] = 1.0
    assert zoo.load("bert_layer").tensor("data").shape == (1, 128, 768)
    assert zoo.load("resnet18").tensor("dense1_bias").shape == (1, 1000)


########## The ops added for imported models ##########

def _erf(x):
    import math

    return np.vectorize(math.erf)(x)


# op -> (input shapes, constant positions, attributes, an independent NumPy implementation)
NEW_OPS = {
    "sigmoid": ([(3, 17)], (), {}, lambda x: 1 / (1 + np.exp(-x))),
    "tanh": ([(3, 17)], (), {}, np.tanh),
    "erf": ([(3, 17)], (), {}, _erf),
    "clip": ([(3, 17)], (), {"lo": -0.3, "hi": 0.4}, lambda x, lo, hi: np.minimum(np.maximum(x, lo), hi)),
    "scale_axis": ([(2, 5, 4), (5,)], (1,), {"axis": 1}, lambda x, s, axis: x * s[None, :, None]),
    "concat": ([(2, 3, 4), (2, 5, 4), (2, 1, 4)], (), {"axis": 1}, lambda *xs, axis: np.concatenate(xs, axis)),
}


@pytest.mark.parametrize("op", sorted(NEW_OPS))
def test_an_op_added_for_imports_matches_numpy(op):
    from workbench.engine.ir.graph import GraphBuilder

    shapes, consts, attrs, np_fn = NEW_OPS[op]
    b = GraphBuilder(op)
    names = [(b.const if i in consts else b.input)(f"x{i}", s) for i, s in enumerate(shapes)]
    b.op("op", op, *names, **attrs)
    graph = b.build()
    values = {k: v * 2 for k, v in graph.random_inputs(5).items()}  # beyond the clip bounds too
    want = np_fn(*(values[n].astype(np.float64) for n in names), **attrs)
    got = make_program(graph).build().run(values)["op"]
    assert np.abs(got - want).max() < 1e-5 and np.abs(graph.reference(values)["op"] - want).max() < 1e-6


########## Small models through ONNX and torch.export files ##########

class Convs(nn.Module):
    """Every kind of conv of the op library, batch norms after a conv with a bias and after a
    concat (neither folded by TVM), the activations, pools and a classifier."""

    def __init__(self) -> None:
        super().__init__()
        self.c1, self.bn1 = nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.BatchNorm2d(8)
        self.dw = nn.Conv2d(8, 8, 3, padding=2, dilation=2, groups=8)
        self.g = nn.Conv2d(8, 16, 1, groups=2, bias=False)
        self.bn2 = nn.BatchNorm2d(32)
        self.t = nn.ConvTranspose2d(32, 8, 4, stride=2, padding=1)
        self.fc = nn.Linear(8, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.bn1(self.c1(x)))
        y = self.g(torch.clamp(self.dw(y), -0.5, 0.5))
        y = y * torch.sigmoid(y)
        y = self.bn2(torch.cat([y, torch.tanh(y)], 1))
        y = F.relu6(self.t(F.avg_pool2d(F.max_pool2d(y, 3, 2, 1), 2)))
        return torch.softmax(self.fc(torch.flatten(F.adaptive_avg_pool2d(y, 1), 1)), -1)


class Seq1d(nn.Module):
    """C1D, layer norm, a dense layer on a 3-D tensor, GELU (erf in ONNX) and a scalar add."""

    def __init__(self) -> None:
        super().__init__()
        self.c, self.ln, self.fc = nn.Conv1d(4, 8, 3, padding=1), nn.LayerNorm(16), nn.Linear(16, 6)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(self.fc(self.ln(self.c(x)))) + 1.0


SMALL = {"Convs": (Convs, (1, 3, 16, 16)), "Seq1d": (Seq1d, (2, 4, 16))}


def write_model(folder: Path, name: str, kind: str) -> tuple[Path, nn.Module, np.ndarray]:
    """``name`` (seeded random weights) saved as ``kind``: onnx (dynamo exporter), onnx_legacy
    (TorchScript exporter) or pt2 (``torch.export.save``)."""
    cls, shape = SMALL[name]
    module = networks.randomize(cls(), seed=3)
    x = random_input(shape)
    args = (torch.from_numpy(x),)
    path = folder / f"{name}_{kind}.{'pt2' if kind == 'pt2' else 'onnx'}"
    if kind == "pt2":
        torch.export.save(torch.export.export(module, args), path)
    else:
        torch.onnx.export(module, args, path, dynamo=kind == "onnx", external_data=False, input_names=["x"],
                          opset_version=18 if kind == "onnx" else 17)
    return path, module, x


@pytest.mark.parametrize("name, kind", [("Convs", "onnx"), ("Convs", "onnx_legacy"), ("Convs", "pt2"),
                                        ("Seq1d", "onnx_legacy"), ("Seq1d", "pt2")])
@pytest.mark.slow
def test_a_model_file_computes_what_pytorch_and_onnxruntime_compute(tmp_path, name, kind):
    path, module, x = write_model(tmp_path, name, kind)
    spec, graph = zoo.file_model(str(path))
    got = run_graph(graph, x)
    assert_close(got, torch_out(module, x))
    if kind != "pt2":
        ort = pytest.importorskip("onnxruntime")
        sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        assert_close(got, sess.run(None, {"x": x})[0])
    assert spec["inputs"] == {"x": list(x.shape)} and len(spec["sha256"]) == 64


#: a Llama decoder layer scaled down (TinyLlama's shape: 2 query heads a key/value head)
SMALL_LLAMA = dict(hidden=64, heads=4, kv_heads=2, mlp=96)


@pytest.mark.slow  # 15-30 s each: export, import through the CLI, replay, build and run
@pytest.mark.parametrize("phase, kind", [(p, k) for p in ("prefill", "decode") for k in ("pt2", "onnx")])
def test_a_llama_layer_file_imports_replays_and_computes_what_pytorch_computes(tmp_path, capsys, phase, kind):
    from workbench import __main__ as cli

    build = getattr(networks, f"llama_layer_{phase}")
    module, example = build(**SMALL_LLAMA, **({"seq": 37} if phase == "prefill" else {"past": 37}))
    path = tmp_path / f"llama_{phase}.{kind}"
    if kind == "pt2":
        torch.export.save(torch.export.export(module, example), path)
    else:
        torch.onnx.export(module, example, path, dynamo=True, external_data=False, opset_version=18)
    capsys.readouterr()  # the exporter's progress lines
    assert cli.main(["import", str(path), "--out", str(tmp_path / "s.json")]) == 0
    printed = capsys.readouterr().out  # "imported NAME: 23 ops (rms_norm 2, GMM 7, ...)"
    counts = dict(item.split(" ") for item in printed.split("(", 1)[1].split(")", 1)[0].split(", "))
    assert {k: counts[k] for k in ("rms_norm", "rotary", "GQA", "silu_mul", "GMM")} == {
        "rms_norm": "2", "rotary": "2", "GQA": "1", "silu_mul": "1", "GMM": "7"}
    session = loads((tmp_path / "s.json").read_text())
    report = replay_to(session, tmp_path / "out")
    assert report.ok and report.source["ok"] and 0 < report.source["max_abs_error"] < 1e-4
    assert report.source["framework"] == ("PyTorch" if kind == "pt2" else "ONNX Runtime")
    graph = zoo.load_model(session.model)
    xs = [random_input(tuple(e.shape), seed=i) for i, e in enumerate(example)]
    got = make_program(graph).build().run({**graph.random_inputs(0), **dict(zip(graph.inputs, xs))})
    for out, want in zip(graph.outputs, torch_out(module, *xs), strict=True):
        assert_close(got[out], want)


def test_batch_norms_fold_into_the_convs_and_clamps_merge(tmp_path):
    path, _, _ = write_model(tmp_path, "Convs", "onnx_legacy")
    graph = zoo.file_model(str(path))[1]
    kinds = Counter(n.type for n in graph.nodes)
    # bn1 (after a conv with a bias) went into conv1's weight; bn2 (after a concat) is one scale and one bias
    assert kinds["scale_axis"] == 1 and kinds["bias_add"] == 5
    assert graph.node("conv1_bias").inputs[0] == "conv1"
    # ONNX's Clip arrives as a max and a min: one clamp each for clamp(-0.5, 0.5) and relu6
    assert kinds["clip"] == 1 and kinds["relu6"] == 1 and "maximum" not in kinds
    assert [n.kwargs for n in graph.nodes if n.type == "clip"] == [{"lo": -0.5, "hi": 0.5}]


def test_a_factory_is_exported_at_the_given_shapes(tmp_path, monkeypatch):
    (tmp_path / "mymodels.py").write_text(
        "from workbench.engine.models.networks import BertLayer, randomize\n"
        "def small():\n    return randomize(BertLayer(32, 4, 64), 5)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    program = export_factory("mymodels:small", {"data": (1, 8, 32)})
    torch.export.save(program, tmp_path / "small.pt2")
    graph = import_file(tmp_path / "small.pt2")
    module = networks.randomize(networks.BertLayer(32, 4, 64), 5)
    x = random_input((1, 8, 32))
    assert_close(run_graph(graph, x), torch_out(module, x))
    with pytest.raises(GraphError, match="give the input shapes, e.g. --input data="):
        export_factory("mymodels:small")
    with pytest.raises(GraphError, match="--input names x do not match the forward's inputs data"):
        export_factory("mymodels:small", {"x": (1, 8, 32)})
    with pytest.raises(GraphError, match="cannot find mymodels:nope"):
        export_factory("mymodels:nope")


def test_a_dynamic_dim_takes_the_given_shape(tmp_path):
    module = networks.randomize(Seq1d(), 2)
    x = torch.from_numpy(random_input((3, 4, 16)))
    path = tmp_path / "dyn.onnx"
    torch.onnx.export(module, (x,), path, dynamo=False, input_names=["x"], dynamic_axes={"x": {0: "batch"}})
    with pytest.raises(GraphError, match=r"x has a dynamic dim 0 \('batch'\); give its shape with --input x=N,4,16"):
        zoo.file_model(str(path))
    spec, graph = zoo.file_model(str(path), {"x": (3, 4, 16)})
    assert spec["inputs"] == {"x": [3, 4, 16]}
    assert_close(run_graph(graph, x.numpy()), torch_out(module, x.numpy()))
    with pytest.raises(GraphError, match="input x dim 1 is 4 in the model, --input gives 5"):
        zoo.file_model(str(path), {"x": (3, 5, 16)})
    with pytest.raises(GraphError, match="unknown input 'y'; the model's inputs: x"):
        zoo.file_model(str(path), {"y": (3, 4, 16)})


########## Sessions pinned to a model file ##########

def test_a_session_replays_its_file_and_refuses_it_once_changed(tmp_path):
    path, _, _ = write_model(tmp_path, "Seq1d", "onnx_legacy")
    spec, graph = zoo.file_model(str(path))
    session = new_session(spec)
    assert session.name == "Seq1d_onnx_legacy" and session.model == spec
    again = loads(dumps(session))  # through the file format, one replay
    assert again.model == spec and replay(again).graph.tensors.keys() == graph.tensors.keys()
    path.write_bytes(path.read_bytes() + b"\0")  # one byte more
    with pytest.raises(SessionError, match=rf'field "model": model file {path} changed since the session was made'):
        replay(session)
    path.unlink()
    with pytest.raises(SessionError, match="does not exist"):
        replay(session)


@pytest.mark.slow
@pytest.mark.parametrize("kind, framework", [("onnx_legacy", "ONNX Runtime"), ("pt2", "PyTorch")])
def test_replay_checks_an_imported_model_against_its_own_framework(tmp_path, kind, framework):
    path, _, _ = write_model(tmp_path, "Seq1d", kind)
    session = new_session(zoo.file_model(str(path))[0])
    report = replay_to(session, tmp_path / "out")
    assert report.source["framework"] == framework and report.source["ok"] and report.ok
    assert 0 < report.source["max_abs_error"] < 1e-4  # random inputs: float32 rounding, never exactly 0
    assert json.loads((tmp_path / "out" / "report.json").read_text())["source"] == report.source


def test_replay_fails_when_the_framework_disagrees(tmp_path, monkeypatch, capsys):
    from workbench import __main__ as cli
    from workbench.engine.session import artifacts as replay_module

    path, _, _ = write_model(tmp_path, "Seq1d", "pt2")
    session = new_session(zoo.file_model(str(path))[0])
    save(session, tmp_path / "s.json")
    real = replay_module.framework_outputs
    monkeypatch.setattr(replay_module, "framework_outputs", lambda m, xs: [y + 0.01 for y in real(m, xs)])
    assert cli.main(["replay", str(tmp_path / "s.json"), "--out", str(tmp_path / "out")]) == 1
    assert "outputs differ from PyTorch's" in capsys.readouterr().err
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["ok"] is False and report["source"]["ok"] is False and report["max_rel_error"] < 1e-4


@pytest.mark.slow
def test_a_zoo_graph_has_no_framework_and_a_builtin_network_has_pytorch():
    assert framework_of({"zoo": "r18_block"}) is None
    assert framework_of({"zoo": "bert_layer", "seq": 4}) == "PyTorch"
    model = {"zoo": "bert_layer", "seq": 4, "hidden": 32, "heads": 2}
    graph = zoo.load_model(model)
    values = graph.random_inputs(0)
    (want,) = framework_outputs(model, [values[t] for t in graph.inputs])
    assert_close(run_graph(graph, values[graph.inputs[0]]), want)


GOOD_SPEC = {"file": "m.onnx", "sha256": "0" * 64, "inputs": {"x": [1, 3]}}


@pytest.mark.parametrize("model, message", [
    ([], "a model is"),
    ({"zoo": 3}, "with NAME a string"),
    ({"nothing": 1}, 'needs {"zoo": NAME'),
    ({**GOOD_SPEC, "extra": 1}, "unknown key 'extra' of a file model"),
    ({**GOOD_SPEC, "file": ""}, '"file" must be a path'),
    ({**GOOD_SPEC, "sha256": "abc"}, '"sha256" must be the SHA-256'),
    ({**GOOD_SPEC, "inputs": [1, 3]}, '"inputs" must map each input name'),
    ({**GOOD_SPEC, "inputs": {"x": [1, 0]}}, "the shape of 'x' must be a list of 1 to 8 positive ints"),
    ({**GOOD_SPEC, "origin": 5}, '"origin" must be a string'),
])
def test_the_model_field_has_one_schema(model, message):
    with pytest.raises(GraphError, match=message.replace("{", r"\{").replace("(", r"\(")):
        zoo.check_model(model)


def test_a_good_spec_passes_the_schema():
    zoo.check_model(GOOD_SPEC)
    zoo.check_model({**GOOD_SPEC, "origin": "pkg.mod:fn"})
    zoo.check_model({"zoo": "resnet18", "batch": 2})


########## Uploads and the trust rule for .pt2 ##########

def test_uploads_take_single_file_onnx_only(tmp_path):
    path, _, _ = write_model(tmp_path, "Seq1d", "onnx_legacy")
    check_upload("model.onnx", path.read_bytes())  # accepted
    with pytest.raises(GraphError, match="a .pt2 file is not accepted as an upload, since loading it unpickles"):
        check_upload("model.pt2", b"PK\x03\x04")
    with pytest.raises(GraphError, match="uploads must be ONNX files"):
        check_upload("model.h5", b"x")
    proto = onnx.load(path)
    onnx.save(proto, tmp_path / "ext.onnx", save_as_external_data=True, all_tensors_to_one_file=True,
              location="ext.onnx.data", size_threshold=0)
    with pytest.raises(GraphError, match="keeps its weights in a separate file"):
        check_upload("ext.onnx", (tmp_path / "ext.onnx").read_bytes())
    # from the local disk, external data beside the model is read, and hashed with it
    spec, graph = zoo.file_model(str(tmp_path / "ext.onnx"))
    assert spec["sha256"] != zoo.file_model(str(path))[0]["sha256"] and graph.constants


def test_parse_input():
    assert parse_input("data=1,3,224,224") == ("data", (1, 3, 224, 224))
    for bad in ("data", "data=", "=1,2", "data=1,x", "data=0,3"):
        with pytest.raises(GraphError, match="write NAME=D1,D2"):
            parse_input(bad)


########## Bad model files (made here) ##########

def _onnx(op: str = "Relu", dtype: int = TensorProto.FLOAT, dims=(1, 8)) -> bytes:
    """x (dims) @ w (8x8) -> op -> y, as ONNX bytes."""
    w = numpy_helper.from_array(np.random.default_rng(0).standard_normal((8, 8)).astype("float32"), "w")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node(op, ["h"], ["y"])]
    if dtype != TensorProto.FLOAT:  # the op on the input itself, in its dtype
        nodes, w = [helper.make_node(op, ["x"], ["y"])], None
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", dtype, list(dims))],
                              [helper.make_tensor_value_info("y", dtype, [dims[0], 8])], [w] if w else [])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def _onnx_gather() -> bytes:
    """x (1x8) gathered at constant int64 indices: TVM's TIR for it would read an int64 constant."""
    idx = numpy_helper.from_array(np.array([0, 2], "int64"), "idx")
    graph = helper.make_graph([helper.make_node("Gather", ["x", "idx"], ["y"], axis=1)], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2])], [idx])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def bad_models(folder: Path) -> dict[str, tuple[list[str], str]]:
    """Write the corpus into ``folder``: case -> (``import`` arguments, fragment of the one-line
    error). Shared with the command-line tests."""
    good = _onnx()
    files = {
        "truncated.onnx": good[: len(good) // 2],
        "text.onnx": b"this is not a model\n" * 4,
        "empty.onnx": b"",
        "not_a_zip.pt2": b"PK? no",
        "int64.onnx": _onnx("Relu", TensorProto.INT64),
        "float64.onnx": _onnx("Relu", TensorProto.DOUBLE),
        "dynamic.onnx": _onnx(dims=("batch", 8)),
        "unmapped.onnx": _onnx_gather(),  # an op outside the library that cannot be an opaque kernel either
        "model.h5": b"HDF",
    }
    for name, data in files.items():
        (folder / name).write_bytes(data)
    with open(folder / "huge.onnx", "wb") as f:  # sparse: no disk used
        f.truncate((MAX_MODEL_MB << 20) + 1)
    cases = {
        "truncated.onnx": "truncated.onnx is not an ONNX model (it does not parse",
        "text.onnx": "text.onnx is not an ONNX model",
        "empty.onnx": "empty.onnx is not an ONNX model",
        "not_a_zip.pt2": "not_a_zip.pt2 is not a torch.export archive",
        "int64.onnx": "unsupported dtype int64 of input x",
        "float64.onnx": "unsupported dtype float64 of input x",
        "dynamic.onnx": "input x has a dynamic dim 0 ('batch'); give its shape with --input x=N,8",
        "unmapped.onnx": "has no counterpart in the op library, and cannot be an opaque kernel",
        "model.h5": "unknown model format '.h5'",
        "huge.onnx": f"over the {MAX_MODEL_MB} MB limit",
        "missing.onnx": "does not exist",
    }
    out = {name: ([str(folder / name)], fragment) for name, fragment in cases.items()}
    out["bad_input_flag"] = ([str(folder / "dynamic.onnx"), "--input", "x=1,eight"], "write NAME=D1,D2")
    out["no_such_factory"] = (["no_such_module_here:build"], "cannot find no_such_module_here:build")
    return out


def test_every_bad_model_is_refused_in_one_line(tmp_path):
    for name, (args, fragment) in bad_models(tmp_path).items():
        if len(args) > 1 or ":" in args[0]:
            continue  # command-line only (tests/test_cli.py)
        with pytest.raises(GraphError) as info:
            zoo.file_model(args[0])
        msg = str(info.value)
        assert fragment in msg and "\n" not in msg, (name, msg)


@pytest.mark.parametrize("cut", [0.05, 0.25, 0.5, 0.75, 0.95, 0.999])
def test_a_truncated_onnx_file_is_refused_wherever_it_is_cut(tmp_path, cut):
    good = _onnx()
    (tmp_path / "t.onnx").write_bytes(good[: int(len(good) * cut)])
    with pytest.raises(GraphError, match="t.onnx is not"):
        zoo.file_model(str(tmp_path / "t.onnx"))


def test_a_truncated_pt2_file_is_refused(tmp_path):
    path, _, _ = write_model(tmp_path, "Seq1d", "pt2")
    data = path.read_bytes()
    for cut in (0.3, 0.9):
        (tmp_path / "t.pt2").write_bytes(data[: int(len(data) * cut)])
        with pytest.raises(GraphError, match="t.pt2 is not a"):
            zoo.file_model(str(tmp_path / "t.pt2"))
