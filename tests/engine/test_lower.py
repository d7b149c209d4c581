"""Lowering: every zoo model, in its default layouts and under every preset that applies to
it, builds with LLVM and matches the reference on random inputs."""

from __future__ import annotations

import pytest

from workbench.engine import zoo
from workbench.engine.errors import LayoutError
from workbench.engine.layout import LayoutBook
from workbench.engine.layouts import apply_actions, preset_actions
from workbench.engine.program import make_program

TARGET = {"kind": "llvm", "num-cores": 2}
SMALL = {"gmm": {"m": 64, "n": 48, "k": 32}}  # the 1024^3 default is slow to run unscheduled


def _first_complex(g, prefix: str):
    return next((n.name for n in g.nodes if n.kind == "complex" and n.type.startswith(prefix)), None)


def _cases():
    """(model, None) and (model, preset) for each preset with an op to apply to."""
    for model in sorted(zoo.MODELS):
        g = zoo.load(model, **SMALL.get(model, {}))
        yield model, None
        for preset in ("channels_last", "blocked", "alt_tiled", "nkn"):
            if _first_complex(g, "matmul" if preset == "nkn" else "conv"):
                yield model, preset


def _book(g, preset):
    if preset is None:
        return LayoutBook()
    if preset == "nkn":
        op = _first_complex(g, "matmul")
    else:
        op = _first_complex(g, "conv")
    params = {"tiles": 2, "ot": 8, "it": 4} if preset == "alt_tiled" else {}
    if preset == "nkn":
        params = {"m": 16, "n": 16}
    return apply_actions(g, LayoutBook(), preset_actions(g, preset, op, **params))


@pytest.mark.parametrize("model, preset", list(_cases()), ids=lambda v: str(v))
def test_model_under_preset_matches_the_reference(model, preset):
    g = zoo.load(model, **SMALL.get(model, {}))
    book = _book(g, preset)
    ver = make_program(g, book).build(TARGET).verify(g.random_inputs(seed=1))
    assert ver.ok, (model, preset, ver.max_rel_error)


def test_a_padding_split_masks_the_padding_out_of_reductions():
    """64 output channels split by 24 pad to 72: the 8 padding channels must not leak."""
    g = zoo.load("r18_stem")
    book = apply_actions(g, LayoutBook(), [("conv", "split", {"dim": 1, "factors": [-1, 24]}),
                                          ("pad@conv", "split", {"dim": 1, "factors": [-1, 2]})])
    prog = make_program(g, book)
    assert any(buf.layout.shape[1:3] == (3, 24) for buf in prog.plan.buffers.values() if buf.tensor == "conv")
    assert prog.build(TARGET).verify(g.random_inputs(seed=2)).ok


def test_a_preset_that_does_not_fit_is_refused_with_its_reason():
    g = zoo.load("gmm", m=64, n=48, k=32)
    with pytest.raises(LayoutError, match="alt_tiled applies to convolutions"):
        preset_actions(g, "alt_tiled", "gmm")
