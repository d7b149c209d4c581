"""The Loops page's code views: two loop nests side by side in one scrolling table, and the
assembly view (the scheduled kernel built for the session's target, what its assembly holds:
FMAs, spills, register width, and its hottest innermost loop)."""

from __future__ import annotations

import difflib
import html
import json
import re

import streamlit as st

from workbench.engine.build.asm import kernel_asm, summarize_asm
from workbench.engine.base.errors import BuildError
from workbench.engine.session.session import State


_SIDE_BY_SIDE_CSS = """
.nest { max-height: 640px; overflow-y: auto; border: 1px solid rgba(128,128,128,.3); border-radius: .5rem; }
.nest table { border-collapse: collapse; width: 100%; table-layout: fixed; margin: 0;
              font-family: "Source Code Pro", monospace; font-size: 12px; }
.nest td, .nest th { white-space: pre-wrap; overflow-wrap: anywhere; padding: 0 .4rem; vertical-align: top; border: none; }
.nest td.diff_header { color: #888; text-align: right; user-select: none; }
.nest td:not(.diff_header) { padding-left: 2.4em; text-indent: -2em; }  /* a wrapped line's rest indented */
.nest .diff_add { background: rgba(46,160,67,.25); }
.nest .diff_chg { background: rgba(210,153,34,.3); }
.nest .diff_sub { background: rgba(248,81,73,.25); }
.nest thead th { position: sticky; top: 0; background: rgb(240,242,246); text-align: left; z-index: 1; }
/* a narrow window stacks the two nests, each at full width, instead of halving its lines */
.nest-one { display: none; margin-bottom: .6rem; }
@media (max-width: 1100px) { .nest-pair { display: none; } .nest-one { display: block; } }
"""
# difflib's navigation columns (links to the next change) and its width-less column groups out;
# line numbers narrow, the two code columns share the rest
_NAV = re.compile(r'<t[dh] class="diff_next"[^>]*>.*?</t[dh]>|<colgroup></colgroup>\s*', re.S)
#: a row of the side-by-side table: line number and line, before and after (empty where absent)
_ROW = re.compile(r'<tr><td class="diff_header"[^>]*>(.*?)</td><td[^>]*>(.*?)</td>'
                  r'<td class="diff_header"[^>]*>(.*?)</td><td[^>]*>(.*?)</td></tr>', re.S)
_COLUMNS = '<colgroup><col style="width:3.2em"><col><col style="width:3.2em"><col></colgroup>'


def side_by_side_html(before: str, after: str, left: str = "before", right: str = "after") -> str:
    """Two scripts as one HTML table (``difflib.HtmlDiff``): line against line, changed parts
    marked, in one scrolling box, so both sides scroll together; long lines wrap within their
    half instead of being cut. In a window of 1100 px or less the two nests are shown one
    above the other instead (the same lines and marks, each at full width).

    >>> page = side_by_side_html("x = 1", "x = 1\\ny = 2")
    >>> pair, *stacked = page.split("<div class='nest nest-one'>")
    >>> "nest-pair" in pair and pair.count("<tr>"), "y = 2" in page, "diff_next" in page
    (3, True, False)
    >>> [part.count("<tr>") for part in stacked]  # the stacked nests: a header and their lines
    [2, 3]
    """
    table = difflib.HtmlDiff(tabsize=4).make_table(before.splitlines(), after.splitlines(),
                                                   html.escape(left), html.escape(right))
    table = _NAV.sub("", table).replace("&nbsp;", " ").replace(' nowrap="nowrap"', "")
    table = table.replace("<thead>", _COLUMNS + "<thead>", 1)
    rows = _ROW.findall(table)
    stacked = "".join(
        f"<div class='nest nest-one'><table><colgroup><col style='width:3.2em'><col></colgroup><thead><tr>"
        f"<th colspan='2' class='diff_header'>{html.escape(label)}</th></tr></thead><tbody>"
        + "".join(f"<tr><td class='diff_header'>{r[side]}</td><td>{r[side + 1]}</td></tr>" for r in rows if r[side])
        + "</tbody></table></div>" for side, label in ((0, left), (2, right)))
    return f"<style>{_SIDE_BY_SIDE_CSS}</style><div class='nest nest-pair'>{table}</div>{stacked}"


def side_by_side(before: str, after: str, left: str = "before", right: str = "after") -> None:
    """Draw ``side_by_side_html``."""
    st.html(side_by_side_html(before, after, left, right))


@st.cache_data(max_entries=16, show_spinner="building the kernel for its assembly…")
def _asm(session_key: str, kernel: str, target: str, _state: State) -> str:
    return kernel_asm(_state.scheduled_func(kernel), json.loads(target), kernel)


def assembly(state: State, kernel: str) -> None:
    """Counts, notes, the hot loop and the whole assembly of ``kernel`` as scheduled."""
    try:
        text = _asm(state.session.key(), kernel, json.dumps(state.session.target, sort_keys=True), state)
    except BuildError as e:
        st.error(str(e))
        return
    s = summarize_asm(text)
    cols = st.columns(5)
    cols[0].metric("vector FMAs", s.vector_fma, help="packed fused multiply-adds (vfmadd...ps) in the whole kernel")
    cols[1].metric("scalar float ops", s.scalar_fma + s.scalar_math, help="...ss / ...sd arithmetic: remainders, "
                   "reductions, or loops left unvectorized")
    cols[2].metric("spills", s.spills, help="registers stored to the stack by LLVM's register allocator")
    cols[3].metric("reloads", s.reloads, help="values read back from the stack")
    cols[4].metric("widest vector", f"{s.vector_bits} bit" if s.vector_bits else "none")
    st.markdown("\n".join(f"- {note}" for note in s.notes()))
    lines = text.splitlines()
    if s.hot is not None:
        a, b = s.hot
        st.caption(f"The hottest innermost loop (lines {a + 1} to {b + 1} of the assembly: the one with the most FMAs)")
        st.code("\n".join(lines[a:b + 1]), language="nasm")
    with st.expander(f"The whole assembly ({len(lines)} lines, AT&T syntax as LLVM prints it; the hot loop marked)"):
        st.html(listing_html(text, s.hot))


def listing_html(text: str, hot: tuple[int, int] | None) -> str:
    """The whole assembly with line numbers, the ``hot`` lines (0-based, inclusive) marked.

    >>> page = listing_html("a\\nb\\nc", (1, 1))
    >>> page.count("<tr"), page.count("class='hot'"), "<td>b</td>" in page
    (3, 1, True)
    """
    a, b = hot if hot is not None else (-1, -1)
    marks = ["" if not a <= i <= b else " class='hot'" for i in range(len(text.splitlines()))]
    rows = "".join(f"<tr{mark}><td class='diff_header'>{i + 1}</td><td>{html.escape(line)}</td></tr>"
                   for i, (line, mark) in enumerate(zip(text.splitlines(), marks)))
    return (f"<style>{_SIDE_BY_SIDE_CSS} .nest tr.hot td {{ background: rgba(255,193,7,.3); }}</style>"
            f"<div class='nest'><table><colgroup><col style='width:4em'><col></colgroup><tbody>{rows}"
            "</tbody></table></div>")
