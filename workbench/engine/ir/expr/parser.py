"""The parser of expression ops: a Pratt parser over ``lexer`` tokens (never Python's ``eval``
or ``ast``, so the served app runs no user text). Grammar::

    statement := access ("=" | "+=" | "max=") expr ["for" NAME "<" INT ("," NAME "<" INT)*]
    access    := NAME "[" expr ("," expr)* "]"
    expr      := expr ("or" | "and" | "<" | "<=" | ">" | ">=" | "==" | "!=" | "+" | "-" | "*" | "/" | "//" | "%") expr
               | ("-" | "not") expr | NUMBER | NAME | access | FUNCTION "(" expr ("," expr)* ")" | "(" expr ")"

Operators bind as in Python (``nodes.PRECEDENCE``); comparisons do not chain. FUNCTION is one
of ``nodes.FUNCTIONS``; what each part may be (index, value, condition) is ``check``'s. The
``for`` clause gives reduction indices their extents (for indices no read bounds on its own).

>>> print(parse("out[i, j] = max(a[i, j], 0) * b[j]"))
out[i, j] = max(a[i, j], 0) * b[j]
"""

from __future__ import annotations

from .check import check_index, kind_of
from .lexer import ExprError, Token, tokenize
from .nodes import COMPARISONS, FUNCTIONS, PRECEDENCE, REDUCTIONS, Access, Binary, Call, Name, Node, Num, Statement, Unary, first_column

__all__ = ["parse", "parse_node", "KEYWORDS", "MAX_DEPTH", "MAX_TOKENS"]

#: words that are neither tensors nor indices
KEYWORDS = frozenset({"and", "or", "not", "for", *FUNCTIONS})


def parse(text: str, start_column: int = 1) -> Statement:
    """The statement ``text`` (its first character at ``start_column``), checked: the output's
    indices are distinct index names, every index is a (quasi-)affine whole number, the value is
    a number (``check``). Raises ``ExprError`` naming the column and what was expected.

    >>> parse("out[i] += a[i, j")
    Traceback (most recent call last):
    ...
    workbench.engine.ir.expr.lexer.ExprError: column 17: expected ',' or ']' after index 1 of a, got the end
    """
    p = _Parser(tokenize(text, start_column))
    out = p.access(p.name("the output tensor's name (e.g. out[i, j] = ...)"))
    seen: dict[str, int] = {}
    for k, idx in enumerate(out.indices):
        if not isinstance(idx, Name):
            raise ExprError(f"index {k} of the output must be an index name (the output is written at "
                            f"out[i, j, ...]), got {idx}", idx.column)
        if idx.name in seen:
            raise ExprError(f"index {idx.name} appears twice in the output (indices {seen[idx.name]} and {k})",
                            idx.column)
        seen[idx.name] = k
    tok = p.next()
    if tok.text not in REDUCTIONS or tok.kind != "op":
        raise ExprError(f"expected '=', '+=' or 'max=' after the output, got {tok.describe()}", tok.column)
    rhs = p.expr(0)
    domain = p.domain(tok.text, seen) if p.peek().text == "for" and p.peek().kind == "name" else ()
    p.expect_end()
    if kind_of(rhs) == "bool":
        raise ExprError(f"the right side is a condition, not a value: use it in where({rhs}, a, b)",
                        first_column(rhs))
    return Statement(out, tok.text, rhs, domain)


def parse_node(text: str) -> Node:
    """One expression alone (no output), unchecked: for tests and examples."""
    p = _Parser(tokenize(text))
    node = p.expr(0)
    p.expect_end()
    return node


#: parentheses nested deeper than this, or a statement longer than this many tokens, are refused
#: (the parser and the passes over the tree recurse)
MAX_DEPTH = 64
MAX_TOKENS = 256


class _Parser:
    def __init__(self, tokens: list[Token]) -> None:
        if len(tokens) > MAX_TOKENS:
            raise ExprError(f"the expression is longer than {MAX_TOKENS} tokens: split it into several ops",
                            tokens[MAX_TOKENS].column)
        self.tokens, self.pos, self.depth = tokens, 0, 0

    def peek(self) -> Token:
        return self.tokens[self.pos]

    def next(self) -> Token:
        tok = self.tokens[self.pos]
        self.pos += tok.kind != "end"
        return tok

    def expect(self, text: str, what: str) -> Token:
        tok = self.next()
        if tok.text != text or tok.kind != "op":
            raise ExprError(f"expected {text!r} {what}, got {tok.describe()}", tok.column)
        return tok

    def expect_end(self) -> None:
        tok = self.peek()
        if tok.kind != "end":
            raise ExprError(f"expected an operator or the end of the expression, got {tok.describe()}", tok.column)

    def name(self, what: str) -> Token:
        tok = self.next()
        if tok.kind != "name":
            raise ExprError(f"expected {what}, got {tok.describe()}", tok.column)
        if tok.text in KEYWORDS:
            raise ExprError(f"{tok.text!r} is a reserved word, not a name", tok.column)
        return tok

    def domain(self, reduce: str, outs: dict[str, int]) -> tuple[tuple[str, int], ...]:
        """``for r < 3, s < 2`` (after the value): the reduction indices it declares."""
        start = self.next()
        if reduce == "=":
            raise ExprError("'for' declares reduction indices: reduce over them with += or max=", start.column)
        out: dict[str, int] = {}
        while True:
            name = self.name("a reduction index after 'for' (for r < 3)")
            if name.text in outs or name.text in out:
                which = "an output index" if name.text in outs else "declared twice"
                raise ExprError(f"reduction index {name.text} is {which}", name.column)
            self.expect("<", f"after {name.text} (for {name.text} < EXTENT)")
            ext = self.next()
            if ext.kind != "int" or int(ext.text) < 1:
                raise ExprError(f"expected a positive whole extent of {name.text}, got {ext.describe()}", ext.column)
            out[name.text] = int(ext.text)
            if not (self.peek().text == "," and self.peek().kind == "op"):
                return tuple(out.items())
            self.next()

    def access(self, name: Token) -> Access:
        self.expect("[", f"after {name.text}")
        indices: list[Node] = []
        while True:
            if self.peek().text == "]" and self.peek().kind == "op":
                raise ExprError(f"expected an index of {name.text}, got ']'", self.peek().column)
            idx = self.expr(0)
            check_index(idx, f"index {len(indices)} of {name.text}")
            indices.append(idx)
            tok = self.next()
            if tok.kind == "op" and tok.text == "]":
                return Access(name.text, tuple(indices), name.column)
            if tok.kind != "op" or tok.text != ",":
                raise ExprError(f"expected ',' or ']' after index {len(indices) - 1} of {name.text}, "
                                f"got {tok.describe()}", tok.column)

    def expr(self, min_strength: int) -> Node:
        self.depth += 1
        try:
            return self._expr(min_strength)
        finally:
            self.depth -= 1

    def _expr(self, min_strength: int) -> Node:
        if self.depth > MAX_DEPTH:
            raise ExprError(f"the expression nests more than {MAX_DEPTH} levels deep", self.peek().column)
        left = self.prefix()
        while True:
            tok = self.peek()
            op = tok.text if tok.kind in ("op", "name") else ""
            strength = PRECEDENCE.get(op, 0)
            if not strength or strength < min_strength:
                return left
            self.next()
            right = self.expr(strength + 1)  # left-associative
            if op in COMPARISONS and isinstance(left, Binary) and left.op in COMPARISONS:
                raise ExprError(f"comparisons do not chain: write ({left}) and ({left.b} {op} {right})", tok.column)
            left = Binary(op, left, right, tok.column)

    def prefix(self) -> Node:
        tok = self.next()
        if tok.kind == "int":
            return Num(int(tok.text), tok.column)
        if tok.kind == "float":
            return Num(float(tok.text), tok.column)
        if tok.kind == "op" and tok.text == "-":
            return Unary("-", self.expr(7), tok.column)
        if tok.kind == "name" and tok.text == "not":
            return Unary("not", self.expr(PRECEDENCE["<"]), tok.column)
        if tok.kind == "op" and tok.text == "(":
            inner = self.expr(0)
            self.expect(")", f"to close the '(' at column {tok.column}")
            return inner
        if tok.kind == "name" and tok.text in FUNCTIONS and self.peek().text == "(":
            return self.call(tok)
        if tok.kind == "name" and tok.text not in KEYWORDS:
            if self.peek().text == "(":
                raise ExprError(f"unknown function {tok.text!r}; the functions are {', '.join(FUNCTIONS)}",
                                tok.column)
            if self.peek().text == "[":
                return self.access(tok)
            return Name(tok.text, tok.column)
        if tok.kind == "name" and tok.text in FUNCTIONS:
            raise ExprError(f"expected '(' after the function {tok.text}, got {self.peek().describe()}",
                            self.peek().column)
        raise ExprError(f"expected a value (a number, an index, a tensor element such as a[i], a function "
                        f"call or '('), got {tok.describe()}", tok.column)

    def call(self, fn: Token) -> Call:
        self.expect("(", f"after {fn.text}")
        args = [self.expr(0)]
        while self.peek().text == "," and self.peek().kind == "op":
            self.next()
            args.append(self.expr(0))
        self.expect(")", f"to close the call of {fn.text} (at column {fn.column})")
        if len(args) != FUNCTIONS[fn.text]:
            raise ExprError(f"{fn.text} takes {FUNCTIONS[fn.text]} argument{'s' * (FUNCTIONS[fn.text] > 1)}, "
                            f"got {len(args)}", fn.column)
        return Call(fn.text, tuple(args), fn.column)
