"""The layout book: the requested layout of every tensor of a graph (by name; missing means the
identity layout), and store_at attachments between tensors. Immutable: every change returns a
new book.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Sequence

from ..base.errors import LayoutError
from ..base.index import Window
from .primitives import Layout

__all__ = ["LayoutBook", "Attachment"]


@dataclass(frozen=True, slots=True)
class Attachment:
    """``tensor`` lives in the slot that store_at added to dim ``dim`` of ``host``."""

    tensor: str
    host: str
    dim: int
    at: int  # index of the slot transform in the host's layout


@dataclass(frozen=True, slots=True)
class LayoutBook:
    """Requested layouts by tensor name (missing = identity) and store_at attachments."""

    layouts: tuple[tuple[str, Layout], ...] = ()
    attachments: tuple[Attachment, ...] = ()

    def get(self, name: str) -> Layout | None:
        return dict(self.layouts).get(name)

    def attachment(self, name: str) -> Attachment | None:
        return next((a for a in self.attachments if a.tensor == name), None)

    def with_layout(self, name: str, layout: Layout) -> "LayoutBook":
        items = dict(self.layouts)
        if layout.is_identity:
            items.pop(name, None)
        else:
            items[name] = layout
        return replace(self, layouts=tuple(sorted(items.items())))

    def apply(self, name: str, base: Layout, prim: str, args: dict[str, Any],
              host_base: Layout | None = None) -> "LayoutBook":
        """Apply primitive ``prim`` to tensor ``name`` whose identity layout is ``base``.

        ``host_base`` is the identity layout of ``args["into"]`` for store_at."""
        if self.attachment(name) and prim != "decouple_at":
            raise LayoutError(f"{name} is stored inside {self.attachment(name).host} (store_at); "
                              f"decouple_at first")
        current = self.get(name) or base
        if prim == "store_at":
            return self._store_at(name, current, args, host_base)
        if prim == "decouple_at":
            return self._decouple_at(name, args)
        return self.with_layout(name, current.apply(prim, **args))

    def store_at(self, name: str, base: Layout, into: str, host_base: Layout, dim: int) -> LayoutBook:
        """Store tensor ``name`` in an extra slot that ``dim`` of tensor ``into`` grows (e.g. a
        bias beside its weights); ``base`` and ``host_base`` are their identity layouts.

        >>> bias, weight = Layout.identity((64,), "O"), Layout.identity((64, 3), "OI")
        >>> book = LayoutBook().store_at("bias", bias, "weight", weight, dim=1)
        >>> book.get("weight"), book.storage("bias"), book.forward("bias", bias, [5])
        (Layout(O I, shape=(64, 4)), 'weight', [5, 3])
        """
        return self.apply(name, base, "store_at", {"into": into, "dim": dim}, host_base=host_base)

    def decouple_at(self, name: str, dim: int) -> LayoutBook:
        """Undo the store_at at ``dim`` (of the stored tensor ``name``, or of its host).

        >>> bias, weight = Layout.identity((64,), "O"), Layout.identity((64, 3), "OI")
        >>> LayoutBook().store_at("bias", bias, "weight", weight, dim=1).decouple_at("bias", 1) == LayoutBook()
        True
        """
        return self._decouple_at(name, {"dim": dim})

    def _store_at(self, name: str, current: Layout, args: dict[str, Any], host_base: Layout | None) -> "LayoutBook":
        if set(args) != {"into", "dim"}:
            raise LayoutError(f"store_at takes arguments ['dim', 'into'], got {sorted(args)}")
        into, dim = args["into"], args["dim"]
        if host_base is None:
            raise LayoutError(f"store_at into unknown tensor {into!r}")
        if into == name:
            raise LayoutError(f"store_at: {name} cannot be stored into itself")
        if not current.is_identity:
            raise LayoutError(f"store_at: {name} already has layout primitives; store_at must come first")
        if self.attachment(into):
            raise LayoutError(f"store_at: {into} is itself stored inside {self.attachment(into).host}")
        host = self.get(into) or host_base
        d = host._dim(dim)
        rest = host.shape[:d] + host.shape[d + 1:]
        if tuple(current.shape) != rest[: len(current.shape)]:
            raise LayoutError(f"store_at: {name} has shape {current.shape} but {into} without dim {d} "
                              f"({host.dims[d].name}) starts with {rest[: len(current.shape)]}")
        new_host = host.with_slot(d, name)
        book = self.with_layout(into, new_host)
        att = Attachment(name, into, d, len(new_host.transforms) - 1)
        return replace(book, attachments=self.attachments + (att,))

    def _decouple_at(self, name: str, args: dict[str, Any]) -> "LayoutBook":
        if set(args) != {"dim"}:
            raise LayoutError(f"decouple_at takes arguments ['dim'], got {sorted(args)}")
        att = self.attachment(name) or next(
            (a for a in self.attachments if a.host == name and a.dim == args["dim"]), None)
        if att is None:
            raise LayoutError(f"decouple_at: nothing is stored at dim {args['dim']} of {name}")
        if att.dim != args["dim"]:
            raise LayoutError(f"decouple_at: {att.tensor} is stored at dim {att.dim} of {att.host}, "
                              f"not dim {args['dim']}")
        host = self.get(att.host)
        if len(host.transforms) - 1 != att.at:
            raise LayoutError(f"decouple_at: {att.host} has primitives after the store_at of {att.tensor}; "
                              f"undo them first")
        book = self.with_layout(att.host, host.without_last())
        return replace(book, attachments=tuple(a for a in self.attachments if a is not att))

    def forward(self, name: str, base: Layout, idx: Sequence[Any], windows: dict[int, Window] | None = None) -> list:
        """Stored index of ``name``'s element ``idx`` (in its host's buffer when attached)."""
        att = self.attachment(name)
        if att is None:
            return (self.get(name) or base).forward(idx, windows)
        host = self.get(att.host)
        at_shape = Layout.build(host.logical, host.names, host.prims[: att.at]).shape
        full, it = [], iter(idx)
        for d, n in enumerate(at_shape):
            full.append(n if d == att.dim else next(it, 0))
        return host.forward_from(att.at, full)

    def storage(self, name: str) -> str:
        """The buffer that holds ``name`` (its host's when attached)."""
        att = self.attachment(name)
        return att.host if att else name
