"""Counts and durations in words, for the app and the CLI."""

from __future__ import annotations

from typing import Iterable

__all__ = ["plural", "duration", "size", "action_chain"]


def plural(n: int, noun: str, many: str | None = None) -> str:
    """``n`` and the noun, singular for one.

    >>> plural(1, "tuned kernel"), plural(3, "action"), plural(0, "candidate"), plural(2, "task", "tasks each")
    ('1 tuned kernel', '3 actions', '0 candidates', '2 tasks each')
    """
    return f"{n} {noun if n == 1 else (many or noun + 's')}"


def duration(seconds: float) -> str:
    """A duration as a person says it.

    >>> duration(4.2), duration(72), duration(3725), duration(0.3)
    ('4 s', '1 min 12 s', '1 h 2 min', '0.3 s')
    """
    s = max(0.0, float(seconds))
    if s < 1:
        return f"{s:.1f} s"
    s = round(s)
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60} s"
    return f"{s // 3600} h {s % 3600 // 60} min"


def size(nbytes: int) -> str:
    """A cache's or buffer's size in the largest binary unit that keeps it at one or more.

    >>> size(48 * 1024), size(2 * 2**20), size(480 * 2**20), size(1536 * 2**20), size(512)
    ('48 KiB', '2 MiB', '480 MiB', '1.5 GiB', '512 B')
    """
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if nbytes >= scale:
            return f"{nbytes / scale:.3g} {unit}"
    return f"{nbytes} B"


def action_chain(actions: Iterable[tuple[str, str]], width: int | None = None) -> str:
    """A session's actions as one line: ``(target, primitive)`` pairs, consecutive actions on one
    target grouped; with ``width``, the middle elided so the first and last actions stay readable.

    >>> acts = [("conv", "split"), ("conv", "reorder"), ("data@conv", "unfold"), ("conv", "parallel")]
    >>> action_chain(acts)
    'conv: split, reorder · data@conv: unfold · conv: parallel'
    >>> action_chain(acts, 40)
    'conv: split, reorder … conv: parallel'
    >>> action_chain([])
    'default'
    """
    groups: list[tuple[str, list[str]]] = []
    for target, primitive in actions:
        if groups and groups[-1][0] == target:
            groups[-1][1].append(primitive)
        else:
            groups.append((target, [primitive]))
    parts = [f"{t}: {', '.join(ps)}" for t, ps in groups]
    text = " · ".join(parts) or "default"
    if width is None or len(text) <= width or len(parts) < 3:
        return text
    head, tail = parts[:1], parts[-1:]
    for k in range(1, len(parts) - 1):  # as many leading groups as fit, the last one always
        if len(" · ".join(parts[:k + 1]) + " … " + tail[0]) > width:
            break
        head = parts[:k + 1]
    return " · ".join(head) + " … " + tail[0]
