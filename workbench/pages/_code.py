"""The Loops page's assembly view: the scheduled kernel built for the session's target, what its
assembly holds (FMAs, spills, register width) and its hottest innermost loop."""

from __future__ import annotations

import json

import streamlit as st

from workbench.engine.asm import kernel_asm, summarize_asm
from workbench.engine.errors import BuildError
from workbench.engine.session import State


@st.cache_data(max_entries=16, show_spinner="building the kernel for its assembly…")
def _asm(session_key: str, kernel: str, target: str, _state: State) -> str:
    return kernel_asm(_state.scheduled(kernel), json.loads(target), kernel)


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
    with st.expander(f"The whole assembly ({len(lines)} lines, AT&T syntax as LLVM prints it)"):
        st.code(text, language="nasm", line_numbers=True)
