"""The benchmarks' result tables: one CSV with every column, one Markdown file a person reads,
and the summary figures under it.

A summary never prints "nan" or a bare "x": a geometric mean over no row names the figure as
missing, and one over some rows says how many.

>>> summary_ratio([1.0, 4.0])
'2x'
>>> summary_ratio([2.0, None, float("nan")])
'2x over 1 of 3 rows'
>>> summary_ratio([None], "network")
'missing (no network has it)'
"""

from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import Any, Mapping, Sequence

__all__ = ["fmt", "geomean", "summary_ratio", "write_tables"]


def fmt(v: Any) -> str:
    """A cell: 4 significant digits for a float; "" for None or a float that is not a number."""
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return ""
    return f"{v:.4g}" if isinstance(v, float) else str(v)


def _measured(vals: Sequence[Any]) -> list[float]:
    return [float(v) for v in vals if isinstance(v, (int, float)) and math.isfinite(v) and v > 0]


def geomean(vals: Sequence[Any]) -> float | None:
    """The geometric mean of the positive, finite values (None: there are none)."""
    got = _measured(vals)
    return math.exp(sum(math.log(v) for v in got) / len(got)) if got else None


def summary_ratio(vals: Sequence[Any], what: str = "row") -> str:
    """A ratio's geometric mean as a summary says it: ``1.5x``, ``1.5x over 2 of 3 rows`` when
    some rows lack it, ``missing (no row has it)`` when all do."""
    got = _measured(vals)
    if not got:
        return f"missing (no {what} has it)"
    text = f"{fmt(geomean(got))}x"
    return text if len(got) == len(vals) else f"{text} over {len(got)} of {len(vals)} {what}s"


def write_tables(out_dir: Path, stem: str, columns: Sequence[str], rows: Sequence[Mapping[str, Any]],
                 heading: str, footer: str = "", shown: Sequence[str] | None = None,
                 titles: Mapping[str, str] | None = None,
                 shown_rows: Sequence[Mapping[str, Any]] | None = None) -> tuple[Path, Path]:
    """``STEM.csv`` (every column of ``columns``) and ``STEM.md`` (``heading``, a table of the
    ``shown`` columns under their ``titles``, ``footer``) in ``out_dir``; ``shown_rows``: the
    Markdown table's cells where they differ from the CSV's (a flagged figure spelled out)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    csv_path, md_path = out_dir / f"{stem}.csv", out_dir / f"{stem}.md"
    with csv_path.open("w", newline="") as f:
        wr = csv.DictWriter(f, fieldnames=list(columns))
        wr.writeheader()
        wr.writerows({k: fmt(r.get(k)) for k in columns} for r in rows)
    shown, titles = list(shown or columns), titles or {}
    lines = [heading, "", "| " + " | ".join(titles.get(k, k) for k in shown) + " |", "|" + "---|" * len(shown)]
    lines += ["| " + " | ".join(fmt(r.get(k)) for k in shown) + " |" for r in (shown_rows or rows)]
    md_path.write_text("\n".join(lines + (["", footer] if footer else [])) + "\n")
    return csv_path, md_path
