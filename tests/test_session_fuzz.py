"""Arbitrary session JSON through the command line (hypothesis): every file either replays
correctly (status 0) or is refused with status 2 and one line naming the problem; never a
traceback, never a changed input file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from workbench import cli

ROOT = Path(__file__).resolve().parents[1]
# a small, valid base to mutate: replays in a second or two when a mutation leaves it valid
BASE = {"format": "alt-workbench-session", "version": 1, "name": "fuzz", "target": {"kind": "llvm", "num-cores": 1},
        "model": {"zoo": "gmm", "m": 16, "n": 16, "k": 16},
        "actions": [{"kind": "layout", "tensor": "gmm", "primitive": "split", "args": {"dim": 1, "factors": [-1, 8]}}]}

scalars = st.one_of(st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
                    st.floats(allow_nan=False), st.text(max_size=12))
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                       st.dictionaries(st.text(max_size=8), inner, max_size=4)),
                      max_leaves=12)
# field paths of BASE a mutation may replace (shape, type and nesting errors at every level)
PATHS = [("format",), ("version",), ("name",), ("target",), ("target", "kind"), ("target", "num-cores"),
         ("target", "mcpu"), ("model",), ("model", "zoo"), ("model", "m"), ("model", "n"), ("model", "batch"),
         ("actions",), ("actions", 0), ("actions", 0, "kind"), ("actions", 0, "tensor"), ("actions", 0, "primitive"),
         ("actions", 0, "args"), ("actions", 0, "args", "dim"), ("actions", 0, "args", "factors")]
mutations = st.lists(st.tuples(st.sampled_from(PATHS), values), min_size=1, max_size=3)


def _has(node, key) -> bool:
    if isinstance(node, dict):
        return key in node or isinstance(key, str)
    return isinstance(node, list) and isinstance(key, int) and key < len(node)


def mutate(doc: dict, changes: list) -> dict:
    """``doc`` with each path set to its value (a path through a replaced part is skipped)."""
    doc = json.loads(json.dumps(doc))
    for path, value in changes:
        node = doc
        for key in path[:-1]:
            if not (_has(node, key) and (isinstance(node, list) or key in node)):
                break
            node = node[key]
        else:
            if _has(node, path[-1]):
                node[path[-1]] = value
    return doc


def check_cli(tmp_path: Path, text: str, capsys) -> None:
    path = tmp_path / "s.json"
    path.write_text(text)
    before = path.read_bytes()
    capsys.readouterr()
    rc = cli.main(["replay", str(path), "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err.strip().splitlines()
    assert path.read_bytes() == before
    if rc == 0:
        assert json.loads((tmp_path / "out" / "report.json").read_text())["ok"]
    else:
        assert rc == 2 and len(err) == 1 and err[0].startswith("error: "), (rc, err)


@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(changes=mutations)
def test_a_mutated_session_replays_or_is_refused_in_one_line(tmp_path, capsys, changes):
    check_cli(tmp_path, json.dumps(mutate(BASE, changes)), capsys)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(doc=values)
def test_any_json_document_is_refused_in_one_line(tmp_path, capsys, doc):
    check_cli(tmp_path, json.dumps(doc), capsys)


@pytest.mark.parametrize("model, field", [({"zoo": "gmm", "m": "abc"}, '"m"'), ({"zoo": "gmm", "m": 64.5}, '"m"'),
                                          ({"zoo": "r18_stem", "batch": -1}, '"batch"'),
                                          ({"zoo": "r18_stem", "batch": 100000}, '"batch"'),
                                          ({"zoo": "gmm", "m": 65536, "n": 64, "k": 16384}, "over the limit")])
def test_bad_model_options_name_the_field(tmp_path, capsys, model, field):
    text = json.dumps({**BASE, "model": model, "actions": []})
    check_cli(tmp_path, text, capsys)
    # check_cli read stderr; run again to read the message
    cli.main(["replay", str(tmp_path / "s.json"), "--out", str(tmp_path / "out")])
    assert field in capsys.readouterr().err


def test_a_target_other_than_llvm_is_refused_by_name(tmp_path, capsys):
    (tmp_path / "s.json").write_text(json.dumps({**BASE, "target": {"kind": "cuda"}}))
    assert cli.main(["replay", str(tmp_path / "s.json")]) == 2
    assert "target kind 'cuda' is not supported here" in capsys.readouterr().err
