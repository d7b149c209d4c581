"""The engine imports neither Streamlit nor Plotly; figure builders import neither TVM nor Streamlit."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "workbench"
RULES = {"engine": {"streamlit", "plotly"}, "viz": {"streamlit", "tvm"}}


def forbidden_imports(source: str, banned: set[str]) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(source)):
        names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                 else [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else [])
        found += [n for n in names if n.split(".")[0] in banned]
    return found


def test_checker_catches_a_forbidden_import():
    assert forbidden_imports("import plotly.graph_objects as go\nfrom streamlit import x", {"plotly", "streamlit"}) == [
        "plotly.graph_objects", "streamlit"]
    assert forbidden_imports("from . import plotly_helpers\nimport numpy", {"plotly"}) == []


@pytest.mark.parametrize("package", sorted(RULES))
def test_package_respects_layering(package):
    files = sorted((ROOT / package).rglob("*.py"))
    assert files, f"no modules under workbench/{package}"
    bad = {str(f.relative_to(ROOT)): forbidden_imports(f.read_text(), RULES[package]) for f in files}
    assert {k: v for k, v in bad.items() if v} == {}
