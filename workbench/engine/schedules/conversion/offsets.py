"""Where a conversion block reads (its one source) and writes, as flat element offsets of its
loops' values: ``CopyAccess`` evaluates the block's own index expressions on NumPy arrays, so
that the conversion schedules can ask for many loop values at once."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import numpy as np
from tvm import tirx

from ...loops.primitives import LoopInfo, block_nest, visit_nodes

__all__ = ["CopyAccess"]


class _Unreadable(Exception):
    """An index expression the NumPy evaluator does not know."""


_BINARY: dict[str, Callable[[Any, Any], Any]] = {
    "Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "FloorDiv": np.floor_divide, "FloorMod": np.mod,
    "Min": np.minimum, "Max": np.maximum}


def _evaluate(expr: Any, env: Mapping[str, Any]) -> Any:
    """An integer TIR expression of the block's variables, on NumPy arrays (broadcast)."""
    kind = type(expr).__name__
    if kind == "IntImm":
        return int(expr.value)
    if kind == "Var":
        return env[expr.name]
    if kind in _BINARY:
        return _BINARY[kind](_evaluate(expr.a, env), _evaluate(expr.b, env))
    if kind == "Cast":
        return _evaluate(expr.value, env)
    raise _Unreadable(kind)


def _flat(indices: Sequence[Any], shape: Sequence[int], env: Mapping[str, Any]) -> Any:
    flat: Any = 0
    for i, n in zip(indices, shape):
        flat = flat * n + _evaluate(i, env)
    return flat


@dataclass(frozen=True)
class CopyAccess:
    """Where a conversion block reads (its one source) and writes, as flat element offsets of
    its loops' values (``offsets``), from the block's own index expressions."""

    names: tuple[str, ...]  # the block variable of each loop, outermost first
    src: tuple[Any, ...]
    src_shape: tuple[int, ...]
    dst: tuple[Any, ...]
    dst_shape: tuple[int, ...]
    itemsize: int

    @staticmethod
    def of(func: tirx.PrimFunc, block: str, loops: Sequence[LoopInfo]) -> CopyAccess | None:
        """The block's accesses; None when they cannot be evaluated (then the pieces keep the
        destination's order)."""
        realize = block_nest(func, block)[0]
        loads: list[Any] = []  # 0.27's loads are TensorLoad nodes (their buffer is ``source``)
        stores: list[Any] = []
        visit_nodes(realize.block.body, lambda n: loads.append(n) if type(n).__name__ in ("BufferLoad", "TensorLoad")
                    else stores.append(n) if type(n).__name__ == "BufferStore" else None)
        # the unscheduled block binds each of its variables to one loop
        bound = {v.name: iv.var.name for v, iv in zip(realize.iter_values, realize.block.iter_vars)
                 if isinstance(v, tirx.Var)}
        if not loads or len(stores) != 1 or any(lp.name not in bound for lp in loops):
            return None
        # a conversion block reads its one input (twice at most: under a padding guard)
        load, store = loads[0], stores[0]
        src = load.source if hasattr(load, "source") else load.buffer
        try:
            itemsize = np.dtype(str(store.buffer.dtype)).itemsize
        except TypeError:
            itemsize = 4
        access = CopyAccess(tuple(bound[lp.name] for lp in loops), tuple(load.indices),
                            tuple(int(n) for n in src.shape), tuple(store.indices),
                            tuple(int(n) for n in store.buffer.shape), itemsize)
        try:
            access.offsets([0] * len(loops))
        except (_Unreadable, KeyError):
            return None
        return access

    def offsets(self, values: Sequence[Any]) -> tuple[Any, Any]:
        """Source and destination offsets (elements) at these loop values (arrays broadcast)."""
        env = dict(zip(self.names, values))
        return _flat(self.src, self.src_shape, env), _flat(self.dst, self.dst_shape, env)

    def source_along(self, k: int, v: np.ndarray) -> np.ndarray:
        """Source offsets along loop ``k`` (the others at 0)."""
        values: list[Any] = [0] * len(self.names)
        values[k] = v
        return np.broadcast_to(self.offsets(values)[0], v.shape)
