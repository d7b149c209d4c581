"""One form renderer for primitive arguments, layout and loop alike: each argument's widget comes
from its kind in the primitive's ``PrimitiveSpec`` (``workbench.engine.base.step``), and the choices
from a ``FormContext`` the page fills from the engine's data."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import streamlit as st

from workbench.engine.base.errors import WorkbenchError
from workbench.engine.loops.args import split_inner
from workbench.engine.base.step import PrimitiveSpec

__all__ = ["FormContext", "primitive_form", "parse_ints", "picked_arguments", "widget_key"]


@dataclass(frozen=True)
class FormContext:
    """What the widgets may offer: blocks, their loops ``(name, extent)`` and the buffers they
    write ``(name, shape)`` for loop primitives, the current dims' names for layout primitives,
    and the tensors ``tensor`` arguments name."""

    blocks: Sequence[str] = ()
    loops: Mapping[str, Sequence[tuple[str, int]]] = field(default_factory=dict)
    writes: Mapping[str, Sequence[tuple[str, tuple[int, ...]]]] = field(default_factory=dict)
    dims: Sequence[str] = ()
    extents: Sequence[int] = ()  # of ``dims``
    tensors: Sequence[str] = ()


def parse_ints(text: str, what: str, nullable: bool = False) -> list[int | None]:
    """``"4, 16"`` -> ``[4, 16]``; ``null`` (or empty) is ``None`` where allowed."""
    out: list[int | None] = []
    for x in text.replace("[", "").replace("]", "").split(","):
        x = x.strip()
        if nullable and x in ("null", "None", ""):
            out.append(None)
        elif x:
            try:
                out.append(int(x))
            except ValueError:
                raise WorkbenchError(f"{what}: write integers separated by commas"
                                     f"{' (null for one inferred)' if nullable else ''}, got {text!r}") from None
    return out


def widget_key(key: str, name: str, arg: str) -> str:
    """The session-state key of argument ``arg``'s widget in ``primitive_form(name, ..., key)``."""
    return f"{key}_{name}_{arg}"


def picked_arguments(spec: PrimitiveSpec, block: str, loop: str, current: Sequence[str] = (),
                     order: Sequence[str] = ()) -> dict[str, Any]:
    """The arguments a click on loop ``loop`` of ``block`` (a row of the loop table) fills in:
    the block the primitive's loop argument belongs to, and the loop itself (added to
    ``current`` for a list of loops, kept in the block's loop ``order``: fuse takes them outermost
    first). Empty when the primitive takes no loop.

    >>> from workbench.engine.loops.primitives import PRIMITIVES
    >>> picked_arguments(PRIMITIVES["split"], "C", "i1")
    {'block': 'C', 'loop': 'i1'}
    >>> picked_arguments(PRIMITIVES["fuse"], "C", "i", ["j"], order=["i", "j", "k"])
    {'block': 'C', 'loops': ['i', 'j']}
    >>> picked_arguments(PRIMITIVES["compute_at"], "C", "i0")
    {'target_block': 'C', 'loop': 'i0'}
    """
    for arg, kind in spec.args.items():
        if kind == "loop":
            return {spec.loop_of: block, arg: loop}
        if kind == "loops":
            chosen = list(current) + ([loop] if loop not in current else [])
            return {spec.loop_of: block, arg: sorted(chosen, key=lambda n: list(order).index(n) if n in order else -1)}
    return {}


def primitive_form(name: str, spec: PrimitiveSpec, ctx: FormContext, key: str) -> dict[str, Any]:
    """Draw one widget per argument, in columns, and return the arguments; a malformed text
    field raises ``WorkbenchError`` (the page shows it and disables Apply)."""
    args: dict[str, Any] = {}
    cols = st.columns(max(1, len(spec.args)))
    for col, (arg, kind) in zip(cols, spec.args.items()):
        with col:
            args[arg] = _widget(arg, kind, spec, ctx, args, widget_key(key, name, arg))
    return args


def _widget(arg: str, kind: str, spec: PrimitiveSpec, ctx: FormContext, args: dict[str, Any], key: str) -> Any:
    default = spec.defaults.get(arg)
    if kind == "block":  # a second block (compute_at's target) starts from another one than the first
        other = next((i for i, b in enumerate(ctx.blocks) if b not in args.values()), 0)
        return st.selectbox(arg, list(ctx.blocks), key=key, **_start(key, index=other))
    if kind in ("loop", "loops"):
        owner = args.get(spec.loop_of) or (ctx.blocks[0] if ctx.blocks else "")
        loops = dict(ctx.loops.get(owner, ()))
        if kind == "loop":
            return st.selectbox(f"{arg} of {owner}", list(loops), key=key,
                                format_func=lambda n: f"{n} (extent {loops[n]})")
        return st.multiselect(f"{arg} of {owner}", list(loops), key=key)
    if kind == "dim":
        rank = len(ctx.dims)
        return st.selectbox(arg, list(range(rank)), index=min(1, rank - 1), key=key,
                            format_func=lambda d: f"{d} ({ctx.dims[d]})")
    if kind == "written" and (written := ctx.writes.get(args.get(spec.loop_of, ""))):  # by name and shape
        return st.selectbox(arg, list(range(len(written))), key=key,
                            format_func=lambda i: f"{i} ({written[i][0]}, shape {list(written[i][1])})")
    if kind in ("written_factors", "written_perm"):
        return _written_widget(arg, kind, spec, _chosen_buffer(spec, ctx, args), args, key)
    if kind in ("dims", "perm"):
        rank = len(ctx.dims)
        guess = range(rank) if kind == "perm" else range(1, min(3, rank))
        text = st.text_input(f"{arg} (dims 0..{rank - 1}: {' '.join(ctx.dims)})", ", ".join(map(str, guess)), key=key)
        return parse_ints(text, arg)
    if kind in ("int", "written"):
        return int(st.number_input(arg, 0, 1 << 16, key=key, **_start(key, value=int(default or 0))))
    if kind == "ints":
        # the factors of the loop or dim chosen before: a default that always applies, reset on a new choice
        extent = _chosen_extent(spec, ctx, args)
        inner = split_inner(extent)
        text = st.text_input(f"{arg} (comma-separated; one may be null or -1: inferred; extent {extent})",
                             f"-1, {inner}", key=f"{key}_{extent}")
        return parse_ints(text, arg, nullable=True)
    if kind == "tensor":
        return st.selectbox(arg, list(ctx.tensors) or ["(no constant)"], key=key)
    return st.text_input(arg, str(default or ""), key=key)


def _start(key: str, **first: Any) -> dict[str, Any]:
    """A widget's first value, unless the page has set one (a starting argument, a clicked row):
    Streamlit warns of a widget given both."""
    return {} if key in st.session_state else first


def _written_widget(arg: str, kind: str, spec: PrimitiveSpec, buffer: tuple[str, tuple[int, ...]] | None,
                    args: dict[str, Any], key: str) -> list[int]:
    """Factors (one per dim of the chosen written buffer; all 1 keeps its layout) or the
    permutation of its dims after those splits (a split dim is two: outer, inner); the defaults
    always apply, and reset when the buffer or the number of split dims changes."""
    name, shape = buffer or ("the buffer", ())
    if kind == "written_factors":
        text = st.text_input(f"{arg} (one per dim of {name}, shape {list(shape)}; 1 keeps a dim)",
                             ", ".join("1" for _ in shape), key=f"{key}_{name}")
        return parse_ints(text, arg)
    split = next((args.get(a) for a, k in spec.args.items() if k == "written_factors"), None) or ()
    rank = len(shape) + sum(1 for f in split if f and f > 1)
    text = st.text_input(f"{arg} (0..{rank - 1}: the dims of {name} after the splits, a split dim as outer, inner)",
                         ", ".join(map(str, range(rank))), key=f"{key}_{rank}")
    return parse_ints(text, arg)


def _chosen_buffer(spec: PrimitiveSpec, ctx: FormContext, args: dict[str, Any]) -> tuple[str, tuple[int, ...]] | None:
    """The written buffer ``(name, shape)`` the earlier arguments chose (a block and the index of
    one of its writes), if the primitive takes one."""
    written = ctx.writes.get(args.get(spec.loop_of, ""), ())
    i = next((args.get(a) for a, kind in spec.args.items() if kind == "written"), None)
    return written[i] if isinstance(i, int) and 0 <= i < len(written) else None


def _chosen_extent(spec: PrimitiveSpec, ctx: FormContext, args: dict[str, Any]) -> int:
    """The extent of the loop or dim the earlier arguments chose (1 when there is none)."""
    for arg, kind in spec.args.items():
        if kind == "loop" and arg in args:
            return dict(ctx.loops.get(args[spec.loop_of], ())).get(args[arg], 1)
        if kind == "dim" and arg in args and args[arg] < len(ctx.extents):
            return ctx.extents[args[arg]]
    return 1
