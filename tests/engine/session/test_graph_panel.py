"""Which torch.nn module of a built-in network runs each op: what names a repeated block."""

from __future__ import annotations

import pytest

from workbench.engine.models import zoo
from workbench.engine.layout.book import LayoutBook
from workbench.engine.layout.propagate import plan_layouts
from workbench.engine.session.graph_panel import backward_ops, op_details, op_modules


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


def _backward(text: str):
    from workbench.engine.ir.expr import backward_graph, expr_graph, read_expr

    forward = expr_graph(read_expr(text), "f")
    return forward, backward_graph(forward)


def test_the_ops_of_a_backward_pass_are_told_from_the_forward_ones():
    """Of the LLTM cell with its backward pass, exactly the derived ops are gradients (a sum of
    parts and a part through one consumer among them); the forward graph alone has none."""
    from workbench.engine.models.frontend.sources import backward_inputs, import_file
    from workbench.engine.models.training_examples import EXAMPLES_DIR

    path = EXAMPLES_DIR / "lltm_cell.expr"
    full = import_file(path, backward_inputs(path))
    forward = import_file(path)
    roles = backward_ops(full)
    assert set(roles) == {n.name for n in full.nodes} - {n.name for n in forward.nodes}
    assert set(roles.values()) == {"gradient"} and {"grad_gates", "grad_gates__cand", "grad_W"} <= set(roles)
    assert backward_ops(forward) == {} and backward_ops(zoo.load("r18_block")) == {}


def test_a_training_steps_loss_and_update_are_backward_ops_and_its_model_is_not():
    from workbench.engine.models.training_examples import example_step

    step = example_step("capsnet")
    roles = backward_ops(step.graph)
    assert {op for op in ("conv1", "act1", "classes") if op in roles} == set()
    assert roles == {"loss": "loss", "new_w1": "update", "new_w2": "update",
                     **{g: "gradient" for g in ("grad_classes", "grad_act1", "grad_w2", "grad_conv1", "grad_w1")}}


def test_a_zero_gradient_reads_no_gradient_and_is_still_a_backward_op():
    """``m`` reaches ``y`` only through the condition: its gradient is 0 * m, noted so."""
    forward, g = _backward("input a[3]\ninput m[3]\ny: out[i] = where(m[i] > 0, a[i], 0.0)")
    assert "grad_y" not in g.node("grad_m").inputs
    assert backward_ops(g) == {"grad_a": "gradient", "grad_m": "gradient"}
    d = op_details(g, plan_layouts(g, LayoutBook()), "grad_m")
    assert d.gradient_of == ("m", "") and "only through conditions" in d.note


def test_the_panel_shows_an_ops_expression_and_a_gradients_tensor_and_note():
    """A forward op shows its text; the gradient of a strided, dilated conv's input says which
    tensor it is the gradient of and that it needed a guard; the part through one consumer names it."""
    forward, g = _backward("input inp[9]\ninput w[3]\nconv: out[i] += inp[2*i + 2*r] * w[r]\n"
                           "act: out[i] = tanh(conv[i])\nsq: out[i] = conv[i] * conv[i]")
    plan = plan_layouts(g, LayoutBook())
    conv = op_details(g, plan, "conv")
    assert conv.expression == "out[i] += inp[2 * i + 2 * r] * w[r]"
    assert (conv.role, conv.gradient_of, conv.note) == ("", ("", ""), "")
    assert "expr" not in dict(conv.attrs)  # the expression has its own line, not an attribute's
    d = op_details(g, plan, "grad_inp")
    assert d.expression == str(g.node("grad_inp").kwargs["expr"]) and d.expression.startswith("grad_inp[z0] += where(")
    assert (d.role, d.gradient_of) == ("gradient", ("inp", "")) and "non-invertible (a stride)" in d.note
    assert op_details(g, plan, "grad_w").note == "gradient of w at w[r] in conv"
    assert [(p, op_details(g, plan, p).gradient_of) for p in ("grad_conv__act", "grad_conv__sq", "grad_conv")] == [
        ("grad_conv__act", ("conv", "act")), ("grad_conv__sq", ("conv", "sq")), ("grad_conv", ("conv", ""))]
