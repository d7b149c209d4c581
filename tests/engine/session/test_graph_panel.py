"""Which torch.nn module of a built-in network runs each op: what names a repeated block."""

from __future__ import annotations

import pytest

from workbench.engine.models import zoo
from workbench.engine.session.graph_panel import op_modules


@pytest.mark.slow
@pytest.mark.parametrize("name, expected", [
    ("resnet18", {"conv1": "features.0", "conv2": "features.4.body.0", "conv3": "features.4.body.3",
                  "conv6": "features.6.body.0", "conv8": "features.6.down.0", "dense1": "fc"}),
    ("bert_layer", {"dense1": "q", "dense2": "k", "dense3": "v", "dense4": "out"}),
])
def test_a_built_in_networks_layers_are_named_by_their_module(name, expected):
    options = {"seq": 8, "hidden": 64, "heads": 2} if name == "bert_layer" else {}
    g = zoo.load(name, **options)
    got = op_modules(g, {"zoo": name, **options})
    assert {op: got.get(op) for op in expected} == expected
    # only the ops that come from a layer: BERT's attention matmuls multiply two computed tensors
    assert all(g.node(op).type.startswith("conv") or g.node(op).type == "matmul" for op in got)
    assert len(set(got.values())) == len(got)
    # each op's weight is its module's (a dense layer's transposed): the match is not off by one
    from workbench.engine.models import networks

    module = dict(getattr(networks, name)(**options)[0].named_modules())
    def squeezed(shape) -> tuple:  # a dense weight gets the input's leading unit dims
        return tuple(d for d in shape if d != 1)

    for op, path in got.items():
        ours = squeezed(g.tensor(g.node(op).inputs[-1]).shape)
        assert squeezed(module[path].weight.shape) in (ours, ours[::-1]), (op, path)


def test_a_model_of_the_op_library_has_no_modules():
    assert op_modules(zoo.load("r18_block"), {"zoo": "r18_block"}) == {}
    assert op_modules(zoo.load("r18_block"), {"file": "x.onnx", "sha256": "0" * 64, "inputs": {}}) == {}
