"""Layering (style.md 1): the engine imports neither Streamlit nor Plotly; figure builders import
neither TVM nor Streamlit; neither reaches up into pages or the app."""

import ast
from pathlib import Path

import networkx as nx
import pytest

ROOT = Path(__file__).resolve().parents[1]
UP = {"workbench.pages", "workbench.app", "workbench.bench"}
RULES = {
    "workbench/engine": {"streamlit", "plotly", "workbench.viz"} | UP,
    "workbench/viz": {"streamlit", "tvm", "tvm_ffi"} | UP,
    "workbench/bench": {"streamlit", "plotly", "workbench.viz", "workbench.pages", "workbench.app"},
}


def imported_modules(source: str, package: str = "") -> list[str]:
    """Absolute names of what ``source`` imports; ``package`` resolves relative imports."""
    names = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            parts = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
            base = ".".join(parts + ([node.module] if node.module else []))
            names += [base if a.name == "*" else f"{base}.{a.name}" for a in node.names]
    return names


def forbidden_imports(source: str, banned: set[str], package: str = "") -> list[str]:
    return [n for n in imported_modules(source, package) if any(n == b or n.startswith(b + ".") for b in banned)]


def test_checker_catches_forbidden_imports():
    source = "import plotly.graph_objects as go\nfrom streamlit import session_state\nimport numpy\n"
    assert forbidden_imports(source, {"plotly", "streamlit"}) == ["plotly.graph_objects", "streamlit.session_state"]
    assert forbidden_imports("def f():\n    import tvm\n", {"tvm"}) == ["tvm"]
    assert forbidden_imports("import tvm_ffi\nimport plotly_express_free\n", {"tvm", "plotly"}) == []


def test_checker_resolves_relative_imports():
    assert forbidden_imports("from .. import viz", {"workbench.viz"}, "workbench.engine") == ["workbench.viz"]
    assert forbidden_imports("from ..viz.graph import f", {"workbench.viz"}, "workbench.engine") == [
        "workbench.viz.graph.f"]
    assert forbidden_imports("from . import plotly_helpers", {"plotly"}, "workbench.viz") == []


@pytest.mark.parametrize("folder", sorted(RULES))
def test_package_respects_layering(folder):
    assert (ROOT / folder / "__init__.py").is_file(), f"{folder} is not a package"
    bad = {}
    for path in sorted((ROOT / folder).rglob("*.py")):
        package = ".".join(path.parent.relative_to(ROOT).parts)
        if found := forbidden_imports(path.read_text(), RULES[folder], package):
            bad[str(path.relative_to(ROOT))] = found
    assert not bad, f"forbidden imports: {bad}"


########## Import cycles ##########

def module_names(root: Path, package: str) -> dict[str, Path]:
    """Every module of ``package`` under ``root``, by its dotted name (a package by its own)."""
    names = {}
    for path in sorted((root / package.replace(".", "/")).rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        names[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return names


def import_graph(root: Path = ROOT, package: str = "workbench") -> nx.DiGraph:
    """Module -> each module of the package it imports, at module level or inside a function (both
    count: an import hidden in a function is still a dependency). A name is charged to the longest
    module that holds it: ``from .frontend import read_model`` to ``frontend`` (its __init__)."""
    modules = module_names(root, package)
    graph = nx.DiGraph()
    graph.add_nodes_from(modules)
    for name, path in modules.items():
        here = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for imported in imported_modules(path.read_text(), here):
            parts = imported.split(".")
            target = next((m for m in (".".join(parts[:k]) for k in range(len(parts), 0, -1)) if m in modules), None)
            if target is not None and target != name:
                graph.add_edge(name, target)
    return graph


def import_cycles(graph: nx.DiGraph) -> set[tuple[str, ...]]:
    """Each simple cycle once, as a tuple starting at its least module name."""
    out = set()
    for cycle in nx.simple_cycles(graph):
        k = cycle.index(min(cycle))
        out.add(tuple(cycle[k:] + cycle[:k]))
    return out


#: Cycles left for a larger move, each with why it is here. The list may only shrink: the test fails
#: on a cycle not listed and on a listed one that is gone (delete its line then).
ALLOWED_CYCLES: set[tuple[str, ...]] = set()


def test_checker_finds_a_cycle_through_an_import_inside_a_function(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    files = {"__init__.py": "", "a.py": "from . import b\n", "b.py": "def f():\n    from .sub import g\n",
             "sub/__init__.py": "from .c import g\n", "sub/c.py": "import pkg.a\ndef g(): ...\n", "d.py": "import pkg.b\n"}
    for name, text in files.items():
        (pkg / name).write_text(text)
    graph = import_graph(tmp_path, "pkg")
    assert set(graph.edges) == {("pkg.a", "pkg.b"), ("pkg.b", "pkg.sub"), ("pkg.sub", "pkg.sub.c"),
                                ("pkg.sub.c", "pkg.a"), ("pkg.d", "pkg.b")}
    assert import_cycles(graph) == {("pkg.a", "pkg.b", "pkg.sub", "pkg.sub.c")}
    (pkg / "b.py").write_text("def f():\n    return 1\n")
    assert import_cycles(import_graph(tmp_path, "pkg")) == set()


def test_the_package_has_no_import_cycle():
    graph = import_graph()
    assert graph.has_edge("workbench.engine.session.session", "workbench.engine.models.zoo")  # the real tree was read
    cycles = import_cycles(graph)
    assert not cycles - ALLOWED_CYCLES, f"new import cycles: {sorted(cycles - ALLOWED_CYCLES)}"
    assert not ALLOWED_CYCLES - cycles, f"gone, delete from ALLOWED_CYCLES: {sorted(ALLOWED_CYCLES - cycles)}"


########## Private names ##########

def _private(name: str) -> bool:
    return name.startswith("_") and not name.endswith("__")


def _taken(full: str, package: str, modules: set[str]) -> str | None:
    """The private name in dotted name ``full`` that a module of ``package`` may not take: one
    held by a module of ours that is not ``package`` or a package above it (a private module,
    ``pages._state``, belongs to its package, whose modules may import it)."""
    parts = full.split(".")
    k = next((i for i, part in enumerate(parts) if _private(part)), None)
    holder = ".".join(parts[:k]) if k is not None else None
    if holder in modules and not f"{package}.".startswith(f"{holder}."):
        return f"{holder}.{parts[k]}"
    return None


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else None
    return node.id if isinstance(node, ast.Name) else None


def private_imports(source: str, package: str, modules: set[str]) -> list[str]:
    """The private names of other modules of ours that ``source`` (a module of ``package``) takes,
    by an import (``from m import _x``) or as an attribute of a module it imported (``m._x``)."""
    tree = ast.parse(source)
    bound, names = {}, set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias, full in zip(node.names, imported_modules(ast.unparse(node), package)):
                names.add(full)
                if isinstance(node, ast.Import) and not alias.asname:  # `import a.b` binds a
                    bound[full.split(".")[0]] = full.split(".")[0]
                else:
                    bound[alias.asname or alias.name] = full
    for node in ast.walk(tree):
        dotted = _dotted(node) if isinstance(node, ast.Attribute) else None
        head, _, rest = (dotted or "").partition(".")
        if head in bound:
            names.add(f"{bound[head]}.{rest}")
    return sorted({t for t in (_taken(n, package, modules) for n in names) if t})


#: Private names still taken across modules; may only shrink.
ALLOWED_PRIVATE: set[tuple[str, str]] = set()


def test_checker_finds_private_names_taken_from_another_module():
    mods = {"p", "p.m", "p.q", "p.q._s"}
    assert private_imports("from .m import _x, y\nfrom . import m\nm._z()\nm.ok()\n", "p", mods) == ["p.m._x", "p.m._z"]
    assert private_imports("import p.m\np.m._w.f()\nimport p.m as mm\nmm._v\n", "p", mods) == ["p.m._v", "p.m._w"]
    assert private_imports("from . import _s\nfrom ._s import f\n", "p.q", mods) == []  # its own package's
    assert private_imports("from .q._s import f\n", "p", mods) == ["p.q._s"]
    assert private_imports("from onnx.helper import _x\nfrom .m import __version__\nself._y\n", "p", mods) == []


def test_no_module_takes_another_modules_private_name():
    modules = set(module_names(ROOT, "workbench"))
    found = set()
    for path in sorted((ROOT / "workbench").rglob("*.py")):
        package = ".".join(path.parent.relative_to(ROOT).parts)
        found |= {(str(path.relative_to(ROOT)), name) for name in private_imports(path.read_text(), package, modules)}
    assert not found - ALLOWED_PRIVATE, f"private names taken: {sorted(found - ALLOWED_PRIVATE)}"
    assert not ALLOWED_PRIVATE - found, f"gone, delete from ALLOWED_PRIVATE: {sorted(ALLOWED_PRIVATE - found)}"


########## Layers ##########

#: The engine's subpackages, lowest first: a module may import from its own layer and the ones
#: before it, never from a later one. Above the engine: figure builders, benchmarks, the CLI, the app.
LAYERS = [
    "workbench.engine.base",       # errors, files, words, the step record, index arithmetic, timing statistics
    "workbench.engine.ir",         # operators (library and expressions), the graph, opaque kernels
    "workbench.engine.models",     # the zoo, reference networks, importers
    "workbench.engine.layout",     # layout primitives, the layout book, propagation, presets
    "workbench.engine.loops",      # loop primitives as replayable steps
    "workbench.engine.build",      # lowering, targets, codegen, programs, network.so
    "workbench.engine.measure",    # machine ceilings, cache profiles, rooflines, libraries, engines
    "workbench.engine.schedules",  # the schedule policy, expert tiling and conversion schedules
    "workbench.engine.session",    # sessions, replay artifacts, workspaces, what the pages show
    "workbench.engine.tuning",     # MetaSchedule, the joint tuner, tuning jobs
    "workbench.viz",
    "workbench.bench",
    "workbench.cli",
    "workbench.__main__",
    "workbench.app",
    "workbench.pages",
]


def layer_of(module: str) -> int | None:
    return next((i for i, layer in enumerate(LAYERS) if module == layer or module.startswith(layer + ".")), None)


def upward_imports(graph: nx.DiGraph) -> list[tuple[str, str]]:
    """Edges from a module to one in a later layer (a module outside every layer counts as lowest:
    ``workbench.engine`` and ``workbench`` themselves)."""
    def rank(module: str) -> int:
        layer = layer_of(module)
        return -1 if layer is None else layer
    return sorted((a, b) for a, b in graph.edges if rank(b) > rank(a))


def test_every_module_sits_in_a_layer():
    loose = [m for m in module_names(ROOT, "workbench") if layer_of(m) is None
             and m not in ("workbench", "workbench.engine", "workbench.conftest")]
    assert not loose, f"modules outside every layer (move them into one, or add a layer): {loose}"


def test_checker_finds_an_upward_import():
    graph = nx.DiGraph([("workbench.engine.ir.graph", "workbench.engine.layout.book"),
                        ("workbench.engine.layout.book", "workbench.engine.ir.graph"),
                        ("workbench.engine.base.step", "workbench.engine.ir.ops"),
                        ("workbench.bench.suite", "workbench.engine.tuning.joint")])
    assert upward_imports(graph) == [("workbench.engine.base.step", "workbench.engine.ir.ops"),
                                     ("workbench.engine.ir.graph", "workbench.engine.layout.book")]


def test_no_module_imports_from_a_later_layer():
    bad = upward_imports(import_graph())
    assert not bad, "imports from a later layer: " + ", ".join(f"{a} -> {b}" for a, b in bad)
