"""Layering (style.md 1): the engine imports neither Streamlit nor Plotly; figure builders import
neither TVM nor Streamlit; neither reaches up into pages or the app."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
UP = {"workbench.pages", "workbench.app"}
RULES = {
    "workbench/engine": {"streamlit", "plotly", "workbench.viz"} | UP,
    "workbench/viz": {"streamlit", "tvm", "tvm_ffi"} | UP,
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
