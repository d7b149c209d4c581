"""Opaque kernels (``workbench.engine.ir.opaque``): Relax ops the op library does not model, imported
as TVM's legalized TIR; built, run and checked against PyTorch, scheduled with loop primitives,
refusing layout primitives, and converted back to the default layout at their edges."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402
from torch.nn import functional as F  # noqa: E402

from workbench.engine.models import networks, zoo  # noqa: E402
from workbench.engine.base.errors import GraphError, LayoutError, SessionError  # noqa: E402
from workbench.engine.models.frontend import import_module  # noqa: E402
from workbench.engine.models.frontend.translate import to_graph  # noqa: E402
from workbench.engine.layout.keys import apply_layout, layout_keys  # noqa: E402
from workbench.engine.layout.book import LayoutBook  # noqa: E402
from workbench.engine.loops.primitives import list_blocks, list_loops, loop_step  # noqa: E402
from workbench.engine.ir.opaque import _REFS  # noqa: E402
from workbench.engine.build.program import make_program  # noqa: E402
from workbench.engine.session.session import new_session, replay  # noqa: E402
from workbench.engine.base.step import Step  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning", "ignore::UserWarning")


class ConvExpCumsum(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)

    def forward(self, x):
        return torch.cumsum(torch.exp(self.conv(x)), dim=1)


class Heads(nn.Module):
    """A conv, then ops outside the library on its output (one output each)."""

    def __init__(self, head) -> None:
        super().__init__()
        self.conv, self.head = nn.Conv2d(3, 8, 3, padding=1), head

    def forward(self, x):
        return self.head(self.conv(x))


HEADS = {  # name -> (head, the Relax ops that must be opaque)
    "log_softmax": (lambda y: F.log_softmax(y, dim=1), {"nn.log_softmax"}),
    "slice_power": (lambda y: torch.pow(y[:, 1:5, :, ::2], 2.0), {"strided_slice", "power"}),
    "leaky_sin": (lambda y: torch.sin(F.leaky_relu(y, 0.1)), {"nn.leakyrelu", "sin"}),
    "sum": (lambda y: y.sum(dim=2), {"sum"}),
    "resize": (lambda y: F.interpolate(y, scale_factor=2, mode="nearest"), {"image.resize2d"}),
}


def _input(shape=(1, 3, 8, 8), seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-1, 1, shape).astype("float32")


def _import(module: nn.Module, x: np.ndarray, name: str = "m"):
    module = networks.randomize(module, seed=3).eval()
    return module, import_module(module, (torch.from_numpy(x),), name)


def _run(graph, x: np.ndarray, program=None) -> np.ndarray:
    values = graph.random_inputs(0)
    values[graph.inputs[0]] = x
    return (program or make_program(graph)).build().run(values)[graph.outputs[0]]


def _err(got: np.ndarray, want: np.ndarray) -> float:
    assert got.shape == want.shape and np.abs(want).max() > 1e-3  # a real signal, not zeros
    return float(np.abs(got.astype(np.float64) - want).max())


def _opaque_ops(graph) -> dict[str, str]:
    return {n.name: n.kwargs["op"] for n in graph.nodes if n.type == "opaque"}


def test_conv_exp_cumsum_is_a_conv_then_two_opaque_kernels_that_match_pytorch():
    x = _input()
    module, graph = _import(ConvExpCumsum(), x)
    assert sorted(_opaque_ops(graph).values()) == ["cumsum", "exp"]
    prog = make_program(graph)
    opaque = set(_opaque_ops(graph))
    assert all(k.ops == (k.head,) and not k.fused for k in prog.plan.kernels if k.head in opaque)  # never fused
    with torch.no_grad():
        want = module(torch.from_numpy(x)).numpy()
    assert _err(_run(graph, x, prog), want) < 1e-5
    assert prog.build().verify().ok


@pytest.mark.parametrize("name", HEADS)
def test_an_op_outside_the_library_is_an_opaque_kernel_matching_pytorch(name):
    head, ops = HEADS[name]
    x = _input()
    module, graph = _import(Heads(head), x, name)
    assert ops <= set(_opaque_ops(graph).values())
    with torch.no_grad():
        want = module(torch.from_numpy(x)).numpy()
    assert _err(_run(graph, x), want) < 1e-5
    assert make_program(graph).build().verify().ok  # against the op's reference (NumPy/PyTorch or TVM's)


def test_an_op_with_no_numpy_equivalent_is_checked_against_tvms_own_build():
    assert "image.resize2d" not in _REFS  # so its reference is the one-call Relax function, built by TVM
    x = _input()
    _, graph = _import(Heads(HEADS["resize"][0]), x)
    node = next(n for n in graph.nodes if n.type == "opaque")
    y = np.random.default_rng(2).uniform(-1, 1, graph.tensors[node.inputs[0]].shape).astype("float32")
    ref = node.op.reference([y], node.kwargs)
    want = F.interpolate(torch.from_numpy(y), scale_factor=2, mode="nearest").numpy()
    assert _err(ref, want) < 1e-6


def test_an_opaque_graph_is_equal_when_imported_again():
    x = _input()
    module, g1 = _import(ConvExpCumsum(), x)
    g2 = import_module(module, (torch.from_numpy(x),), "m")
    assert g1.nodes == g2.nodes and hash(g1.nodes) == hash(g2.nodes)


def test_an_op_tvm_cannot_legalize_is_refused_in_one_line():
    from tvm import relax

    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((2, 4), "float32"))
    with bb.function("main", [x]):
        y = bb.emit(relax.op.nn.relu(x))
        out = bb.emit(relax.op.ewise_fma(y, y, y))  # no legalization in TVM
        bb.emit_func_output(out)
    with pytest.raises(GraphError) as info:
        to_graph(bb.get(), "fma")
    msg = str(info.value)
    assert "operator ewise_fma has no counterpart in the op library" in msg and "legaliz" in msg
    assert "\n" not in msg


########## Sessions: loop primitives, layout refusals, conversions, tuning ##########

@pytest.fixture(scope="module")
def session(tmp_path_factory):
    x = _input()
    module = networks.randomize(ConvExpCumsum(), seed=3).eval()
    path = Path(tmp_path_factory.mktemp("opaque")) / "conv_exp_cumsum.pt2"
    torch.export.save(torch.export.export(module, (torch.from_numpy(x),)), path)
    spec, _ = zoo.file_model(str(path))
    return new_session(spec)


def test_a_loop_primitive_schedules_an_opaque_kernel(session):
    state = replay(session)
    exp = next(n for n, op in _opaque_ops(state.graph).items() if op == "exp")
    func = state.program.funcs[exp]
    (block,) = list_blocks(func)
    loops = [lp.name for lp in list_loops(func, block)]
    state = state.push(loop_step("fuse", exp, block=block, loops=loops[:2]))
    fused = list_loops(state.scheduled_func(exp), block)[0].name
    state = state.push(loop_step("parallel", exp, block=block, loop=fused))
    state = state.push(loop_step("split", exp, block=block, loop=loops[-1], factors=[None, 4]))
    state = state.push(loop_step("vectorize", exp, block=block, loop=f"{loops[-1]}_1"))
    script = state.scheduled_func(exp).script()
    assert "T.parallel" in script and "T.vectorized" in script
    assert state.scheduled_program().build().verify().ok
    again = replay(state.session)  # the steps replay on a re-imported file
    assert again.scheduled_func(exp).script() == script


def test_layout_primitives_on_an_opaque_kernel_are_refused_and_change_nothing(session):
    state = replay(session)
    ops = _opaque_ops(state.graph)
    exp = next(n for n, op in ops.items() if op == "exp")
    want = f"{exp} is an opaque kernel (TVM's legalized TIR of exp, no op-library definition): its tensors keep " \
           "their default layout"
    assert exp not in layout_keys(state.graph)
    for key in (exp, f"{state.graph.node(exp).inputs[0]}@{exp}"):
        with pytest.raises(SessionError) as info:
            state.push(Step.make("layout", key, "split", dim=1, factors=[2, 4]))
        assert want in str(info.value)
    with pytest.raises(LayoutError, match="opaque kernel"):
        apply_layout(state.graph, LayoutBook(), exp, "reorder", {"perm": [0, 2, 3, 1]})
    assert replay(session).book == state.book and state.session.steps == session.steps


def test_a_neighbours_layout_is_converted_back_before_an_opaque_kernel(session):
    state = replay(session)
    exp = next(n for n, op in _opaque_ops(state.graph).items() if op == "exp")
    src = state.graph.node(exp).inputs[0]
    state = state.push(Step.make("layout", src, "reorder", perm=[0, 2, 3, 1]))  # NHWC
    plan = state.program.plan
    read = plan.reads[(exp, src)]
    assert read != src and plan.buffers[read].layout.is_identity  # a conversion to NCHW on the edge
    assert any(c.dst == read and "opaque kernel" in c.reason for c in plan.conversions)
    assert state.program.build().verify().ok


@pytest.mark.tuning
def test_joint_tuning_a_graph_with_opaque_kernels_does_not_crash(session, tmp_path):
    from workbench.engine.tuning.stages import tune_session

    from workbench.engine.tuning.options import TuneOptions

    tuned = tune_session(session, "joint", 2, tmp_path, TuneOptions(keep_faster=False))
    state = replay(tuned)
    assert [s.target for s in tuned.steps if s.kind == "tuned"] == [state.graph.nodes[0].name]
    assert state.scheduled_program().build().verify().ok


def test_the_graph_figure_draws_opaque_ops_in_a_colour_of_their_own():
    from workbench.viz.graph import graph_figure

    _, graph = _import(ConvExpCumsum(), _input())
    names = {t.name for t in graph_figure(graph, make_program(graph).plan).data}
    assert "opaque" in names


class ExpConv(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)

    def forward(self, x):
        return self.conv(torch.exp(x))


def test_a_complex_consumers_layout_is_a_conversion_after_an_opaque_kernel_not_fused_into_it():
    x = _input()
    module, graph = _import(ExpConv(), x)
    (exp,) = _opaque_ops(graph)
    conv = graph.consumers(exp)[0].name
    book = apply_layout(graph, LayoutBook(), f"{exp}@{conv}", "split", {"dim": 1, "factors": [1, 3]})
    book = apply_layout(graph, book, f"{exp}@{conv}", "reorder", {"perm": [0, 1, 3, 4, 2]})
    prog = make_program(graph, book)
    (conv_k,) = [c for c in prog.plan.conversions if c.tensor == exp]
    assert not conv_k.fused and "opaque kernel" in conv_k.reason
    assert [k.name for k in prog.plan.kernels].index(exp) < [k.name for k in prog.plan.kernels].index(
        f"convert_{exp}_{conv}")
    with torch.no_grad():
        want = module(torch.from_numpy(x)).numpy()
    assert _err(_run(graph, x, prog), want) < 1e-5


def test_an_op_reading_an_integer_constant_is_refused_in_one_line():
    head = (lambda y: torch.index_select(y, 1, torch.tensor([0, 2, 3])))
    with pytest.raises(GraphError) as info:
        _import(Heads(head), _input())
    msg = str(info.value)
    assert "operator take has no counterpart in the op library, and cannot be an opaque kernel: its TIR reads a " \
           "constant tensor" in msg and "\n" not in msg
