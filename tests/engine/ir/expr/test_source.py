"""``.expr`` model files (``engine.expr.source``) and their import as file models
(``frontend.sources`` dispatches them here): inputs, ops, declared shapes, comments, the graph's
outputs, and an error naming the line and column for each kind of bad line."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from workbench.engine.models import zoo
from workbench.engine.base.errors import GraphError
from workbench.engine.ir.expr import ExprError, evaluate, expr_graph, read_expr
from workbench.engine.models.frontend import FORMATS, import_file, input_shapes

GOOD = """# a conv, its activation, and a row max beside them
input inp[1, 3, 9, 11]   # the image
input w[4, 3, 3, 3]

conv: out[n, k, y, x] += inp[n, c, 2*y + r, 2*x + s] * w[k, c, r, s]
act: out[n, k, y, x] = tanh(conv[n, k, y, x])
rowmax[1, 3, 9]: out[n, c, y] max= inp[n, c, y, x]
"""


def test_a_file_gives_inputs_ops_and_outputs_that_no_op_reads():
    src = read_expr(GOOD)
    assert dict(src.inputs) == {"inp": (1, 3, 9, 11), "w": (4, 3, 3, 3)}
    assert [(o.name, o.shape, o.line) for o in src.ops] == [("conv", None, 5), ("act", None, 6),
                                                          ("rowmax", (1, 3, 9), 7)]
    g = expr_graph(src, "good", "doc")
    assert g.inputs == ["inp", "w"] and g.outputs == ("act", "rowmax")
    assert g.node("conv").inputs == ("inp", "w") and g.tensors["act"].shape == (1, 4, 4, 5)
    assert str(g.node("act").kwargs["expr"]) == "out[n, k, y, x] = tanh(conv[n, k, y, x])"
    values = g.random_inputs(0)
    ref = g.reference(values)
    np.testing.assert_allclose(ref["rowmax"], values["inp"].max(axis=3))
    conv = evaluate(g.node("conv").kwargs["expr"], [values["inp"], values["w"]])
    np.testing.assert_allclose(ref["act"], np.tanh(conv), rtol=1e-6)


# the file's lines -> the error's line, column and fragment
BAD = {
    "no shape": ("input x\nf: out[i] = x[i]", 1, 8, "expected '[' and the shape of input x, got the end"),
    "zero dim": ("input x[0, 3]", 1, 9, "expected a positive whole dim of x's shape, got '0'"),
    "many dims": ("input x[" + ", ".join(["1"] * 9) + "]", 1, 7, "x has 9 dims; at most 8"),
    "after input": ("input x[3] y", 1, 12, "expected the end of the line after input x[...], got 'y'"),
    "no colon": ("input a[3]\nconv out[i] = a[i]", 2, 6, "expected ':' after the op's name conv"),
    "twice": ("input a[3]\na: out[i] = a[i]", 2, 1, "a is defined twice"),
    "bad op": ("input a[3]\n\nf: out[i] = max(a[i], 0", 3, 24, "op f: expected ')' to close the call of max"),
    "read before defined": ("input a[3]\nf: out[i] = g[i]\ng: out[i] = a[i]", 2, 13, "op f: unknown tensor 'g'"),
    "bad character": ("input a[3]\nf: out[i] = a[i] ; 1", 2, 18, "unexpected character ';'"),
    "unused input": ("input a[3]\ninput b[2]\nf: out[i] = a[i]", 0, 0, "input b is read by no op"),
    "no op": ("# nothing\ninput a[3]\n", 0, 0, "defines no op"),
    "reserved": ("input exp[3]", 1, 7, "expected the input's name, got 'exp'"),
    "train twice": ("input a[3]\ntrain a\ntrain a\nf: out[i] = a[i]", 3, 1, "a second train line"),
    "train no name": ("input a[3]\ntrain 3\nf: out[i] = a[i]", 2, 7, "expected a parameter's name after train"),
    "train bad lr": ("input a[3]\ntrain a lr 0\nf: out[i] = a[i]", 2, 12, "expected a positive learning rate"),
    "train tail": ("input a[3]\ntrain a b\nf: out[i] = a[i]", 2, 9, "expected ',', lr or the end of the train line"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_each_bad_line_is_named_by_line_and_column(case):
    text, line, column, fragment = BAD[case]
    with pytest.raises(ExprError) as e:
        expr_graph(read_expr(text, "m.expr"), "m", what="m.expr")
    assert fragment in str(e.value) and "m.expr" in str(e.value)
    assert (e.value.line, e.value.column) == (line, column), str(e.value)
    if line:
        assert str(e.value).startswith(f"line {line}, column {column}: m.expr: ")


def test_bytes_that_are_not_text_are_refused():
    with pytest.raises(ExprError, match="m.expr is not UTF-8 text"):
        read_expr(b"input a[3]\n\xff\xfe", "m.expr")


def test_an_expr_file_imports_as_a_file_model_pinned_by_its_hash(tmp_path):
    path = tmp_path / "good.expr"
    path.write_text(GOOD)
    assert ".expr" in FORMATS
    assert input_shapes(path) == {"inp": (1, 3, 9, 11), "w": (4, 3, 3, 3)}
    spec, g = zoo.file_model(str(path))
    assert spec == {"file": str(path), "sha256": hashlib.sha256(GOOD.encode()).hexdigest(),
                    "inputs": {"inp": [1, 3, 9, 11], "w": [4, 3, 3, 3]}}
    assert g == import_file(path) and g.name == "good" and "good.expr" in g.doc
    assert zoo.load_model(spec) == g
    with pytest.raises(GraphError, match="input w dim 0 is 4 in the model, --input gives 5"):
        input_shapes(path, {"w": [5, 3, 3, 3]})
    with pytest.raises(GraphError, match="unknown input 'x'"):
        import_file(path, {"x": [1]})


def test_a_train_line_names_the_parameters_and_the_learning_rate():
    src = read_expr("input x[2, 3]\ninput w[4, 3]\ntrain w lr 0.25\ny: out[n, k] += x[n, c] * w[k, c]\n")
    assert (src.train, src.lr) == (("w",), 0.25) and [o.name for o in src.ops] == ["y"]
    assert (read_expr("input w[3]\ntrain w\ny: out[i] = w[i]").lr, read_expr(GOOD).train) == (0.1, ())


def test_a_file_with_a_train_line_imports_as_its_training_step(tmp_path):
    """Forward, loss, backward and update in one graph; one step's loss and update match PyTorch's SGD."""
    import torch

    path = tmp_path / "lin.expr"
    path.write_text("input x[5, 3]\ninput w[4, 3]\ntrain w lr 0.5\ny: out[n, k] += x[n, c] * w[k, c]\n")
    g = import_file(path)
    assert g.outputs == ("loss", "new_w") and set(g.inputs) == {"x", "w", "target_y"}
    values = g.random_inputs(3)
    got = g.reference(values)
    w = torch.tensor(values["w"], requires_grad=True)
    loss = torch.nn.functional.mse_loss(torch.tensor(values["x"]) @ w.T, torch.tensor(values["target_y"]))
    loss.backward()
    np.testing.assert_allclose(got["loss"][0], loss.item(), rtol=1e-5)
    np.testing.assert_allclose(got["new_w"], (w - 0.5 * w.grad).detach().numpy(), rtol=1e-5, atol=1e-6)
    bad = tmp_path / "bad.expr"
    bad.write_text("input x[5, 3]\ninput w[4, 3]\ntrain v\ny: out[n, k] += x[n, c] * w[k, c]\n")
    with pytest.raises(GraphError, match="bad.expr: .*v"):
        import_file(bad)
