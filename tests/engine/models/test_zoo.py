"""The model zoo: names follow the convention the sessions rely on, docstrings document every
op and tensor, shapes are those the docstrings state, and r18_stem is exactly the ALT paper's
case study."""

from __future__ import annotations

import re
import threading

import numpy as np
import pytest

from workbench.engine.models import zoo
from workbench.engine.base.errors import GraphError

CONST_ROLES = {"weight", "bias", "gamma", "beta"}


@pytest.mark.parametrize("model", sorted(zoo.MODELS))
def test_the_docstring_lists_every_op_and_tensor(model):
    g = zoo.load(model)
    doc = zoo.MODELS[model].__doc__ or ""
    assert g.doc == doc
    words = set(re.findall(r"[A-Za-z_](?:[\w.]*\w)?", doc))  # names, dots inside
    for node in g.nodes:
        assert node.name in words, f"{model}: op {node.name} is not in the docstring"
    for t in g.tensors:
        assert t in words, f"{model}: tensor {t} is not in the docstring"


@pytest.mark.parametrize("model", sorted(zoo.MODELS))
def test_names_follow_the_convention(model):
    g = zoo.load(model)
    ops = {n.name for n in g.nodes}
    for node in g.nodes:  # an op's output tensor has the op's name
        assert g.tensor(node.name).role == "op" and g.producer(node.name) is node
    for t, ten in g.tensors.items():
        if ten.role == "const":  # constants are <op>.<role>, read by that op
            owner, _, what = t.rpartition(".")
            assert owner in ops and what in CONST_ROLES, t
            assert t in g.node(owner).inputs
        elif ten.role == "input":
            assert "." not in t and t not in ops
    assert {t for t, ten in g.tensors.items() if ten.role == "op"} == ops
    assert set(g.inputs) <= {"data", "a"} and g.inputs
    if model != "gmm":
        assert g.inputs == ["data"]
    assert any(n.kind == "complex" for n in g.nodes)
    # every graph output is an op's output that nothing reads
    for out in g.outputs:
        assert g.producer(out) is not None and not g.consumers(out)


def test_r18_stem_is_the_paper_case_study():
    g = zoo.load("r18_stem")
    assert [(n.name, n.type, n.inputs) for n in g.nodes] == [
        ("pad", "pad", ("data",)), ("conv", "conv2d", ("pad", "conv.weight")), ("bias", "bias_add", ("conv", "bias.bias")),
        ("relu", "relu", ("bias",))]
    assert g.tensor("data").shape == (1, 3, 224, 224) and g.tensor("data").role == "input"
    pad = g.node("pad").kwargs
    assert tuple(pad["before"]) == tuple(pad["after"]) == (0, 0, 3, 3)
    assert g.tensor("pad").shape == (1, 3, 230, 230)
    assert g.tensor("conv.weight").shape == (64, 3, 7, 7) and g.tensor("conv.weight").role == "const"
    conv = g.node("conv")
    assert conv.kwargs.get("stride") in (2, (2, 2)) and conv.kwargs.get("padding", 0) in (0, (0, 0))
    assert conv.kwargs.get("dilation", 1) in (1, (1, 1)) and conv.kwargs.get("groups", 1) == 1
    assert conv.label == "C2D"
    assert g.tensor("bias.bias").shape == (64,) and g.node("bias").kwargs.get("axis", 1) == 1
    assert g.tensor("conv").shape == g.tensor("bias").shape == g.tensor("relu").shape == (1, 64, 112, 112)
    assert g.outputs == ("relu",)
    assert zoo.DEFAULT_MODEL == "r18_stem"
    assert set(g.tensors) == {"data", "pad", "conv.weight", "conv", "bias.bias", "bias", "relu"}


@pytest.mark.parametrize("model, label, out_shape", [
    ("c1d", "C1D", (1, 128, 256)), ("c3d", "C3D", (1, 64, 8, 28, 28)), ("dil", "DIL", (1, 64, 28, 28)),
    ("grp", "GRP", (1, 128, 28, 28)), ("t2d", "T2D", (1, 64, 32, 32)), ("t3d", "T3D", (1, 16, 8, 32, 32)),
    ("gmm", "GMM", (1024, 1024)),
])
def test_single_operator_models_have_the_documented_shapes(model, label, out_shape):
    g = zoo.load(model)
    (node,) = [n for n in g.nodes if n.kind == "complex"]
    assert node.label == label
    assert g.tensor(node.name).shape == out_shape
    assert "x".join(map(str, out_shape[1:])) in (zoo.MODELS[model].__doc__ or "").replace(",", "x")


def test_blocks_have_the_documented_structure():
    r = zoo.load("r18_block")
    assert r.node("add").inputs == ("conv2_bias", "data") and r.tensor("relu2").shape == (1, 64, 56, 56)
    assert [n.label for n in r.nodes if n.kind == "complex"] == ["C2D", "C2D"]
    m = zoo.load("mv2_block")
    assert [n.label for n in m.nodes if n.kind == "complex"] == ["C2D", "DEP", "C2D"]
    assert m.tensor("dw.weight").shape == (144, 1, 3, 3) and m.tensor("add").shape == (1, 24, 28, 28)
    assert m.node("add").inputs == ("project_bias", "data")
    b = zoo.load("bert_tiny_layer")
    assert b.tensor("scores").shape == (2, 128, 128) and b.tensor("ffn1").shape == (128, 512)
    assert b.tensor("ln2").shape == (128, 128) and b.outputs == ("ln2",)
    assert sum(1 for n in b.nodes if n.label == "GMM") == 8


def test_every_complex_type_has_a_model():
    labels = {n.label for m in zoo.MODELS for n in zoo.load(m).nodes if n.kind == "complex"}
    assert {"C1D", "C2D", "C3D", "GMM", "T2D", "T3D", "DIL", "GRP", "DEP"} <= labels


def test_options_and_unknown_models():
    assert zoo.load("gmm", m=8, n=4, k=2).tensor("gmm").shape == (8, 4)
    assert zoo.load("r18_stem", batch=2).tensor("data").shape[0] == 2
    assert zoo.load("c3d", batch=3).tensor("conv").shape == (3, 64, 8, 28, 28)
    with pytest.raises(GraphError, match="unknown zoo model 'resnet9000'"):
        zoo.load("resnet9000")
    with pytest.raises(GraphError, match="unknown model option 'heads' for r18_stem; it takes: batch$"):
        zoo.load("r18_stem", heads=3)
    with pytest.raises(GraphError, match=r'model option "batch" of bert_tiny_layer must be in \[1, 1\], got 2$'):
        zoo.load("bert_tiny_layer", batch=2)
    with pytest.raises(GraphError, match=r'model option "hidden" of bert_tiny_layer must be a multiple of heads \(3\)'):
        zoo.load("bert_tiny_layer", hidden=128, heads=3)


def test_every_builder_parameter_has_a_declared_schema():
    import inspect

    for name, build in {**zoo.MODELS, **zoo.NETWORKS}.items():
        assert set(inspect.signature(build).parameters) == set(zoo.OPTIONS[name]), name


def test_network_options_are_checked_before_anything_is_imported(monkeypatch):
    """The networks (tests/engine/models/frontend/test_import.py checks them against PyTorch) share the schema."""
    monkeypatch.setattr(zoo, "_imported", lambda *a, **k: pytest.fail("imported a refused model"))
    assert not set(zoo.NETWORKS) & set(zoo.MODELS)
    with pytest.raises(GraphError, match=r'model option "batch" of resnet18 must be in \[1, 64\], got 0'):
        zoo.load("resnet18", batch=0)
    with pytest.raises(GraphError, match=r'model option "seq" of bert_layer must be in \[1, 512\], got 1000'):
        zoo.load("bert_layer", seq=1000)
    with pytest.raises(GraphError, match="unknown model option 'seq' for mobilenet_v2; it takes: batch$"):
        zoo.load("mobilenet_v2", seq=3)
    with pytest.raises(GraphError, match="known: r18_stem, .*, resnet18, mobilenet_v2, bert_layer, "
                                         "llama_layer_prefill, llama_layer_decode$"):
        zoo.load("resnet9000")
    with pytest.raises(GraphError, match=r'"heads" of llama_layer_decode must be a multiple of kv_heads \(3\)'):
        zoo.load("llama_layer_decode", heads=4, kv_heads=3)
    with pytest.raises(GraphError, match="llama_layer_prefill: rotary embedding needs an even head dim, got hidden "
                                         "36 / 4 heads"):
        zoo.load("llama_layer_prefill", hidden=36, heads=4, kv_heads=2)


########## The Llama decoder layer, scaled down (hidden 64, 4 query heads in 2 groups, MLP 96) ##########

SMALL_LLAMA = dict(hidden=64, heads=4, kv_heads=2, mlp=96)


def _llama(name: str, seed: int = 0, **options: int):
    """The network's graph (scaled down unless ``options`` say otherwise), random inputs, its
    built program and PyTorch's outputs (in output order)."""
    from workbench.engine.models.frontend.framework import framework_outputs
    from workbench.engine.build.program import make_program

    model = {k: v for k, v in {"zoo": name, **SMALL_LLAMA, **options}.items() if v is not None}
    graph = zoo.load_model(model)
    values = graph.random_inputs(seed)
    built = make_program(graph).build()
    return graph, values, built, framework_outputs(model, [values[t] for t in graph.inputs])


def _close(got: np.ndarray, want: np.ndarray) -> None:
    assert got.shape == want.shape and np.abs(want).max() > 1e-2
    assert np.abs(got - want).max() / np.abs(want).max() < 1e-4


@pytest.mark.slow  # 5-15 s: torch.export, import, build
def test_llama_prefill_matches_pytorch_and_a_later_token_leaves_earlier_outputs_unchanged():
    graph, values, built, want = _llama("llama_layer_prefill", seq=37)
    labels = [n.label for n in graph.nodes]
    assert {k: labels.count(k) for k in ("rms_norm", "rotary", "GQA", "GMM", "silu_mul", "add")} == {
        "rms_norm": 2, "rotary": 2, "GQA": 1, "GMM": 7, "silu_mul": 1, "add": 2}
    assert dict(graph.node("attention1").attrs) == {"causal": True, "scale": 0.25}
    assert {"rms1", "rotary1", "rotary2", "attention1", "silu_mul1", "add2"} <= set(re.findall(r"\w+", graph.doc))
    got = built.run(values)
    assert [graph.tensor(t).shape for t in graph.outputs] == [(1, 37, 64), (1, 2, 37, 16), (1, 2, 37, 16)]
    for t, w in zip(graph.outputs, want, strict=True):
        _close(got[t], w)
    later = {**values, "data": values["data"].copy()}
    later["data"][:, 30] += 1.0  # token 30 changes
    again = built.run(later)
    for t in graph.outputs:  # hidden states (1, S, H) and K/V (1, KV, S, D): the token dim differs
        axis = 1 if graph.tensor(t).shape[1] == 37 else 2
        np.testing.assert_array_equal(np.take(again[t], range(30), axis), np.take(got[t], range(30), axis))
        assert np.abs(np.take(again[t], [30], axis) - np.take(got[t], [30], axis)).max() > 1e-3


@pytest.mark.slow
@pytest.mark.parametrize("past", [1, 128])
def test_llama_decode_with_a_cache_matches_pytorch_and_appends_to_the_cache(past):
    graph, values, built, want = _llama("llama_layer_decode", past=past)
    assert graph.inputs == ["data", "past_k", "past_v"] and graph.tensor("past_k").shape == (1, 2, past, 16)
    assert dict(graph.node("attention1").attrs)["causal"] is False  # one token sees the whole cache
    got = built.run(values)
    for t, w in zip(graph.outputs, want, strict=True):
        _close(got[t], w)
    k, v = (got[t] for t in graph.outputs[1:])
    assert k.shape == v.shape == (1, 2, past + 1, 16)
    np.testing.assert_array_equal(k[:, :, :past], values["past_k"])
    np.testing.assert_array_equal(v[:, :, :past], values["past_v"])


########## Imports from several threads (the app's tabs and reruns) ##########

#: small BERT layers: the smallest zoo networks that go through torch.export (0.1-0.3 s each)
SMALL_BERTS = [dict(seq=8, hidden=32, heads=2), dict(seq=16, hidden=48, heads=4)]


def _bert_reference(options: dict):
    """The graph of ``bert_layer(**options)`` imported directly, without the zoo's cache or lock."""
    from workbench.engine.models import networks
    from workbench.engine.models.frontend import import_module

    return import_module(*networks.bert_layer(**options), "bert_layer", zoo.bert_layer.__doc__)


def _same_graph(got, want) -> None:
    assert got.nodes == want.nodes and got.inputs == want.inputs and got.outputs == want.outputs
    assert {t: v.shape for t, v in got.tensors.items()} == {t: v.shape for t, v in want.tensors.items()}
    assert set(got.values) == set(want.values)
    for name, value in want.values.items():
        np.testing.assert_array_equal(got.values[name], value, err_msg=name)


@pytest.mark.slow
def test_two_networks_import_at_once_from_two_threads():
    """torch.export is not thread-safe: two imports started together (a model switch while another
    tab imports) corrupt each other ("ProxyTorchDispatchMode slot already occupied", "Trying to pop
    empty mode stack") unless the zoo runs them one at a time."""
    zoo._imported.cache_clear()  # another test may have imported one of them already
    misses = zoo._imported.cache_info().misses
    start = threading.Barrier(len(SMALL_BERTS))
    graphs: dict[int, object] = {}
    errors: list[BaseException] = []

    def build(i: int, options: dict) -> None:
        start.wait()
        try:
            graphs[i] = zoo.load("bert_layer", **options)
        except BaseException as e:  # noqa: BLE001 - reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=build, args=(i, o)) for i, o in enumerate(SMALL_BERTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert zoo._imported.cache_info().misses - misses == len(SMALL_BERTS)  # both were imported, not cached
    for i, options in enumerate(SMALL_BERTS):
        assert graphs[i].tensor("data").shape == (1, options["seq"], options["hidden"])
        _same_graph(graphs[i], _bert_reference(options))


def test_a_failed_import_leaves_nothing_behind_and_a_retry_succeeds(monkeypatch):
    """An import that fails inside torch.export (here: the module's forward raises halfway through
    the trace) is refused in one line naming the model; nothing is cached, and the next load
    imports the network again and gets the right graph."""
    import torch

    from workbench.engine.models import networks

    real, calls = networks.bert_layer, []

    class FailsHalfway(torch.nn.Module):
        def __init__(self, inner: torch.nn.Module) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            self.inner(x)
            raise RuntimeError("injected failure\nits second line")

    def flaky(**options):
        module, example = real(**options)
        calls.append(options)
        return (FailsHalfway(module) if len(calls) == 1 else module), example

    monkeypatch.setattr(networks, "bert_layer", flaky)
    options = dict(seq=8, hidden=32, heads=4)
    with pytest.raises(GraphError) as failed:
        zoo.load("bert_layer", **options)
    assert str(failed.value) == "bert_layer: torch.export failed: injected failure"
    graph = zoo.load("bert_layer", **options)
    assert len(calls) == 2  # the failure was not cached: the retry imported the network again
    monkeypatch.setattr(networks, "bert_layer", real)
    _same_graph(graph, _bert_reference(options))
    assert zoo.load("bert_layer", **options) is graph  # and the success is


@pytest.mark.slow  # minutes on 2 cores: the full-size layer, imported, built and run, in both phases
def test_the_full_size_llama_layer_matches_pytorch_in_both_phases():
    full = dict.fromkeys(SMALL_LLAMA)  # the zoo's defaults: TinyLlama-1.1B's sizes
    graph, values, built, want = _llama("llama_layer_prefill", **full)
    assert [graph.tensor(t).shape for t in graph.outputs] == [(1, 128, 2048), (1, 4, 128, 64), (1, 4, 128, 64)]
    assert dict(graph.node("attention1").attrs) == {"causal": True, "scale": 0.125}
    assert graph.flops("attention1") == 32 * 128 * 128 * (4 * 64 + 8)
    got = built.run(values)
    for t, w in zip(graph.outputs, want, strict=True):
        _close(got[t], w)
    graph, values, built, want = _llama("llama_layer_decode", **full)
    assert graph.tensor("past_k").shape == (1, 4, 128, 64) and graph.tensor("data").shape == (1, 1, 2048)
    got = built.run(values)
    assert [got[t].shape for t in graph.outputs] == [(1, 1, 2048), (1, 4, 129, 64), (1, 4, 129, 64)]
    for t, w in zip(graph.outputs, want, strict=True):
        _close(got[t], w)
