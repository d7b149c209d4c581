"""The expression language's parser (``engine.expr.parser``, with its lexer, tree and checks): every
grammar form, a bad expression for each kind of error with its message and column, and user text
that is Python (never evaluated: a parse error)."""

from __future__ import annotations

import builtins

import pytest

from workbench.engine.base.errors import WorkbenchError
from workbench.engine.ir.expr import ExprError, parse
from workbench.engine.ir.expr.nodes import Access, Binary, Call, Name, Num, Statement, Unary
from workbench.engine.ir.expr.parser import MAX_DEPTH, MAX_TOKENS, parse_node

a_i, b_i, b_j = Access("a", (Name("i"),)), Access("b", (Name("i"),)), Access("b", (Name("j"),))

# text -> the tree of its right side (the output is out[i] or out[i, j])
FORMS = {
    "out[i] = a[i]": a_i,
    "out[i] = 2": Num(2),
    "out[i] = 2.5": Num(2.5),
    "out[i] = 1e-5": Num(1e-5),
    "out[i] = .5": Num(0.5),
    "out[i] = i": Name("i"),
    "out[i] = -a[i]": Unary("-", a_i),
    "out[i] = a[i] + b[i]": Binary("+", a_i, b_i),
    "out[i] = a[i] - b[i] - 1.0": Binary("-", Binary("-", a_i, b_i), Num(1.0)),
    "out[i] = a[i] * b[i] / 2.0": Binary("/", Binary("*", a_i, b_i), Num(2.0)),
    "out[i] = a[i] + b[i] * 3.0": Binary("+", a_i, Binary("*", b_i, Num(3.0))),
    "out[i] = (a[i] + b[i]) * 3.0": Binary("*", Binary("+", a_i, b_i), Num(3.0)),
    "out[i] = a[i // 2]": Access("a", (Binary("//", Name("i"), Num(2)),)),
    "out[i] = a[i % 3]": Access("a", (Binary("%", Name("i"), Num(3)),)),
    "out[i] = a[2*i + 1 - 3]": Access("a", (Binary("-", Binary("+", Binary("*", Num(2), Name("i")), Num(1)), Num(3)),)),
    "out[i] = a[-i + 4]": Access("a", (Binary("+", Unary("-", Name("i")), Num(4)),)),
    "out[i] += a[i, j]": Access("a", (Name("i"), Name("j"))),
    "out[i] max= a[i, j]": Access("a", (Name("i"), Name("j"))),
    **{f"out[i] = {fn}(a[i])": Call(fn, (a_i,)) for fn in ("exp", "log", "tanh", "sigmoid")},
    "out[i] = max(a[i], 0)": Call("max", (a_i, Num(0))),
    "out[i] = min(a[i], b[i])": Call("min", (a_i, b_i)),
    **{f"out[i] = where(a[i] {op} b[i], a[i], 0.0)": Call("where", (Binary(op, a_i, b_i), a_i, Num(0.0)))
       for op in ("<", "<=", ">", ">=", "==", "!=")},
    "out[i] = where(a[i] > 0 and i % 2 == 0 or not b[i] < 1, 1, 0)": Call("where", (
        Binary("or", Binary("and", Binary(">", a_i, Num(0)), Binary("==", Binary("%", Name("i"), Num(2)), Num(0))),
               Unary("not", Binary("<", b_i, Num(1)))), Num(1), Num(0))),
}


@pytest.mark.parametrize("text", sorted(FORMS))
def test_every_form_parses_to_its_tree_and_prints_back(text):
    stmt = parse(text)
    assert stmt.rhs == FORMS[text]
    assert stmt.reduce == text.split("]", 1)[1].split()[0]
    assert parse(str(stmt)) == stmt  # the printed form reads back as the same tree


def test_statement_keeps_the_output_and_columns():
    stmt = parse("out[n, k] += inp[n, c] * w[k, c]", start_column=7)
    product = Binary("*", Access("inp", (Name("n"), Name("c"))), Access("w", (Name("k"), Name("c"))))
    assert stmt == Statement(Access("out", (Name("n"), Name("k"))), "+=", product)
    assert stmt.rhs.column == 30 and stmt.rhs.a.column == 20 and stmt.out.column == 7


def test_printing_keeps_the_parentheses_precedence_needs():
    assert str(parse_node("a - (b - c)")) == "a - (b - c)" and str(parse_node("(a - b) - c")) == "a - b - c"
    assert str(parse_node("-(a + b) * c")) == "-(a + b) * c" and str(parse_node("not (x < 1 or y > 2)")) == \
        "not (x < 1 or y > 2)"


# text -> (column, message): one bad expression per kind of error
ERRORS = {
    "out[i] = a[i] $ 2": (15, "unexpected character '$'"),
    "out[i] = aé[i]": (11, "unexpected character 'é'"),  # names are ASCII (they become TVM and file names)
    "[i] = a[i]": (1, "expected the output tensor's name (e.g. out[i, j] = ...), got '['"),
    "exp[i] = a[i]": (1, "'exp' is a reserved word, not a name"),
    "out = a[i]": (5, "expected '[' after out, got '='"),
    "out[i + 1] = a[i]": (7, "index 0 of the output must be an index name"),
    "out[i, i] = a[i, i]": (8, "index i appears twice in the output (indices 0 and 1)"),
    "out[i] a[i]": (8, "expected '=', '+=' or 'max=' after the output, got 'a'"),
    "out[i] = ": (10, "expected a value (a number, an index, a tensor element such as a[i], a function call or '('), "
                      "got the end"),
    "out[i] = a[i] +": (16, "expected a value"),
    "out[i] = (a[i] + 1": (19, "expected ')' to close the '(' at column 10, got the end"),
    "out[i] = foo(a[i])": (10, "unknown function 'foo'; the functions are exp, log, tanh, sigmoid, max, min, where"),
    "out[i] = max(a[i])": (10, "max takes 2 arguments, got 1"),
    "out[i] = exp + a[i]": (14, "expected '(' after the function exp, got '+'"),
    "out[i] = where(a[i] < b[i] < 0, 1, 0)": (28, "comparisons do not chain"),
    "out[i] = a[i] b[i]": (15, "expected an operator or the end of the expression, got 'b'"),
    "out[i] = a[]": (12, "expected an index of a, got ']'"),
    "out[i] = a[i j]": (14, "expected ',' or ']' after index 0 of a, got 'j'"),
    "out[i] = a[i * j]": (14, "an index is multiplied by constants only (i * j multiplies two indices)"),
    "out[i] = a[i + 1.5]": (12, "index 0 of a must be a whole number made of indices and integer constants, got "
                                "i + 1.5"),
    "out[i] = a[b[i]]": (12, "index 0 of a must be a whole number"),
    "out[i] = a[i // j]": (17, "// divides an index by a positive integer constant only, not by j"),
    "out[i] = a[i % 0]": (16, "% divides an index by a positive integer constant only, not by 0"),
    "out[i] = a[i] // 2": (15, "// applies to indices only (whole numbers), not to the value in a[i] // 2"),
    "out[i] = a[i] > 0": (10, "the right side is a condition, not a value: use it in where(a[i] > 0, a, b)"),
    "out[i] = where(a[i], 1, 0)": (16, "where's condition needs a condition (a comparison such as a[i] > 0), got a[i]"),
    "out[i] = (a[i] > 0) * 2": (11, "* needs a number, got the condition a[i] > 0"),
    "out[i] = where(not a[i], 1, 0)": (20, "not needs a condition"),
    "out[i] = where(a[i] > 0 and 2, 1, 0)": (29, "and needs a condition"),
    "out[i] = " + "(" * (MAX_DEPTH + 2) + "a[i]" + ")" * (MAX_DEPTH + 2): (10 + MAX_DEPTH, "nests more than"),
    "out[i] = a[i]" + " + a[i]" * MAX_TOKENS: (None, f"longer than {MAX_TOKENS} tokens"),
    # the for clause (reduction extents)
    "out[i] = a[i] for r < 3": (15, "'for' declares reduction indices: reduce over them with += or max="),
    "out[i] += a[i, r] for i < 3": (23, "reduction index i is an output index"),
    "out[i] += a[i, r] for r < 3, r < 2": (30, "reduction index r is declared twice"),
    "out[i] += a[i, r] for r < 0": (27, "expected a positive whole extent of r, got '0'"),
    "out[i] += a[i, r] for r 3": (25, "expected '<' after r (for r < EXTENT), got '3'"),
    "out[i] += a[i, r] for exp < 3": (23, "'exp' is a reserved word, not a name"),
    "out[i] += a[i, r] for r < 3 s < 2": (29, "expected an operator or the end of the expression, got 's'"),
    "a[i] = for[i]": (8, "expected a value (a number, an index, a tensor element such as a[i], a function call or "
                         "'('), got 'for'"),
}


@pytest.mark.parametrize("text", sorted(ERRORS))
def test_each_error_names_its_column_and_what_was_expected(text):
    column, message = ERRORS[text]
    with pytest.raises(ExprError) as e:
        parse(text)
    assert message in str(e.value) and message in e.value.reason
    if column is not None:
        assert e.value.column == column and str(e.value).startswith(f"column {column}: ")
    assert isinstance(e.value, WorkbenchError)  # one line on the command line, a message in the app


PYTHON = [
    "__import__('os')",
    "__import__('os').system('ls')",
    "out[i] = __import__('os')",
    "out[i] = eval(a[i])",
    "out[i] = exec(a[i])",
    "out[i] = a[i].sum()",
    "out[i] = a[i] if a[i] > 0 else 0",
    "out[i] = [x for x in a]",
    "import os",
    "lambda: 0",
    "out[i] = a.__class__",
    "out[i] = open(a[i])",
]


@pytest.mark.parametrize("text", PYTHON)
def test_python_is_a_parse_error_and_never_runs(text, monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the parser ran Python")

    for name in ("eval", "exec", "compile"):
        monkeypatch.setattr(builtins, name, refuse)
    with pytest.raises(ExprError) as e:
        parse(text)
    assert e.value.column >= 1


########## Any tree prints as text that parses back to it ##########

from hypothesis import given, settings, strategies as st  # noqa: E402

_names = st.sampled_from(["i", "j", "k"])
_indices = st.recursive(
    st.one_of(_names.map(Name), st.integers(0, 9).map(Num)),
    lambda sub: st.one_of(st.tuples(st.sampled_from(["+", "-"]), sub, sub).map(lambda t: Binary(*t)),
                          st.tuples(st.integers(1, 5).map(Num), sub).map(lambda t: Binary("*", *t)),
                          st.tuples(sub, st.sampled_from(["//", "%"]), st.integers(1, 5).map(Num))
                          .map(lambda t: Binary(t[1], t[0], t[2]))),
    max_leaves=3)
_reads = st.tuples(st.sampled_from(["a", "b"]), st.lists(_indices, min_size=1, max_size=3)).map(
    lambda t: Access(t[0], tuple(t[1])))
_leaves = st.one_of(_reads, st.floats(0, 1e6, allow_nan=False).map(Num))
_comparison = st.tuples(st.sampled_from(["<", "<=", ">", ">=", "==", "!="]), _leaves, _leaves).map(
    lambda t: Binary(*t))
_condition = st.one_of(_comparison, _comparison.map(lambda c: Unary("not", c)),
                       st.tuples(st.sampled_from(["and", "or"]), _comparison, _comparison).map(lambda t: Binary(*t)))
_values = st.recursive(
    _leaves,
    lambda sub: st.one_of(
        st.tuples(st.sampled_from(["+", "-", "*", "/"]), sub, sub).map(lambda t: Binary(*t)),
        sub.map(lambda x: Unary("-", x)),
        st.tuples(st.sampled_from(["exp", "log", "tanh", "sigmoid"]), sub).map(lambda t: Call(t[0], (t[1],))),
        st.tuples(st.sampled_from(["max", "min"]), sub, sub).map(lambda t: Call(t[0], t[1:])),
        st.tuples(_condition, sub, sub).map(lambda t: Call("where", t))),
    max_leaves=5)


@settings(max_examples=60)
@given(_values)
def test_any_tree_prints_as_text_that_parses_back_to_it(tree):
    assert parse_node(str(tree)) == tree
    stmt = parse(f"out[i, j, k] = {tree}")
    assert stmt.rhs == tree and parse(str(stmt)) == stmt


def test_a_for_clause_declares_reduction_indices_and_prints_back():
    stmt = parse("out[i] += a[i, r] * b[s] for r < 3, s < 2")
    assert stmt.domain == (("r", 3), ("s", 2)) and stmt.rhs == Binary("*", Access("a", (Name("i"), Name("r"))),
                                                                       Access("b", (Name("s"),)))
    assert str(stmt) == "out[i] += a[i, r] * b[s] for r < 3, s < 2" and parse(str(stmt)) == stmt
    assert parse("out[i] max= a[i, 2*i + u] for u < 2").domain == (("u", 2),)

