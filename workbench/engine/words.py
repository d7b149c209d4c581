"""Counts and durations in words, for the app and the CLI."""

from __future__ import annotations

__all__ = ["plural", "duration"]


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
