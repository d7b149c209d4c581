"""The model zoo: names follow the convention the sessions rely on, docstrings document every
op and tensor, and r18_stem is exactly the ALT paper's case study."""

from __future__ import annotations

import pytest

from workbench.engine import zoo
from workbench.engine.errors import GraphError


@pytest.mark.parametrize("model", sorted(zoo.MODELS))
def test_names_follow_the_convention_and_the_docstring_documents_them(model):
    g = zoo.load(model)
    doc = zoo.MODELS[model].__doc__ or ""
    for node in g.nodes:
        assert node.name in g.tensors and g.tensor(node.name).role not in ("const", "input")  # output = op name
        assert node.name in doc, f"{model}: op {node.name} is not in the docstring"
    for t, ten in g.tensors.items():
        if ten.role == "const":
            owner, _, what = t.rpartition(".")
            assert owner in {n.name for n in g.nodes} and what in {"weight", "bias", "gamma", "beta"}, t
            assert any(t in n.inputs for n in g.nodes)
    for t in g.inputs:
        assert t in doc, f"{model}: input {t} is not in the docstring"
    assert any(n.kind == "complex" for n in g.nodes)


def test_r18_stem_is_the_paper_case_study():
    g = zoo.load("r18_stem")
    assert [(n.name, n.type) for n in g.nodes] == [("pad", "pad"), ("conv", "conv2d"), ("bias", "bias_add"),
                                                    ("relu", "relu")]
    assert g.tensor("data").shape == (1, 3, 224, 224)
    assert g.tensor("pad").shape == (1, 3, 230, 230)
    assert g.tensor("conv.weight").shape == (64, 3, 7, 7)
    conv = g.node("conv")
    assert conv.kwargs.get("stride") in (2, (2, 2)) and conv.kwargs.get("padding", 0) in (0, (0, 0))
    assert g.tensor("conv").shape == g.tensor("relu").shape == (1, 64, 112, 112)
    assert zoo.DEFAULT_MODEL == "r18_stem"


def test_every_complex_type_has_a_model():
    labels = {n.label for m in zoo.MODELS for n in zoo.load(m).nodes if n.kind == "complex"}
    for want in ("C1D", "C2D", "C3D", "GMM", "T2D", "T3D", "DIL", "GRP", "DEP"):
        assert any(want in lab for lab in labels), (want, labels)


def test_options_and_unknown_models():
    assert zoo.load("gmm", m=8, n=4, k=2).tensor("gmm").shape == (8, 4)
    assert zoo.load("r18_stem", batch=2).tensor("data").shape[0] == 2
    with pytest.raises(GraphError, match="unknown zoo model 'resnet9000'"):
        zoo.load("resnet9000")
