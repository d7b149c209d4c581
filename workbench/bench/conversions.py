"""The benchmark behind ``python -m workbench bench --suite conversions``: layout conversions
(NCHW16c, NHWC, ALT's unfold with halos and its tiled output, the 7x7 stem), each with its
analytic schedule (``schedules.conversion.steps.conversion_steps``), on buffers beyond
the last-level cache of the machine at hand: a case's batch is doubled, conversion by
conversion, until the conversion moves ``LLC_TIMES`` the last-level cache (``scaled_batch``).

Each conversion is checked against its unscheduled kernel on random data, then timed in turn with
a STREAM copy of the same bytes (``interleave.interleaved_samples``): on a shared machine the
copy rate itself moves from one second to the next, so the rate that says how close a conversion
comes to memory speed is the one against the copy timed beside it (``pct_adjacent_copy``, the median of the rounds' ratios).
``pct_copy`` compares with the machine's cached ceiling (``ceilings.copy_gbs``), as the Profile
page does.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

import numpy as np
import tvm

from workbench.engine.base.interleave import call_timer

from .suite import machine_name
from .tables import write_tables
from workbench.engine.layout.book import LayoutBook
from workbench.engine.measure.ceilings import cache_info, get_ceilings, stream_copy
from workbench.engine.build import codegen
from workbench.engine.measure.conversion_rates import buffer_bytes
from workbench.engine.ir.graph import GraphBuilder
from workbench.engine.base.interleave import ROUNDS, interleaved_samples
from workbench.engine.layout.keys import apply_actions
from workbench.engine.layout.presets import preset_actions
from workbench.engine.build.program import make_program

__all__ = ["CASES", "COLUMNS", "ConversionCase", "case_conversions", "run_conversion_bench", "write_conversion_results"]


@dataclass(frozen=True)
class ConversionCase:
    """A convolution whose layouts force conversions: ``preset`` with ``params`` on the conv op
    (``alt_tiled``) or on its input view and output (a tensor preset: there and back)."""

    name: str
    shape: tuple[int, ...]  # the input, NCHW
    out_channels: int
    kernel: int
    stride: int = 1
    padding: int = 0
    preset: str = "alt_tiled"
    params: dict[str, Any] = field(default_factory=dict)


#: batches sized beyond a 32 MB last-level cache; ``scaled_batch`` grows them where the machine's
#: is larger
CASES = (
    ConversionCase("nchw16c", (16, 64, 112, 112), 64, 3, 1, 1, "blocked", {"factor": 16}),
    ConversionCase("nhwc", (16, 64, 112, 112), 64, 3, 1, 1, "channels_last"),
    ConversionCase("alt_3x3_4x16", (16, 64, 112, 112), 64, 3, 1, 1, "alt_tiled", {"tiles": [4, 16]}),
    ConversionCase("alt_1x1s2_4x14", (16, 64, 112, 112), 128, 1, 2, 0, "alt_tiled", {"tiles": [4, 14]}),
    ConversionCase("alt_stem_4x16", (64, 3, 224, 224), 64, 7, 2, 3, "alt_tiled", {"tiles": [4, 16]}),
    ConversionCase("alt_stem_14x2_it1", (64, 3, 224, 224), 64, 7, 2, 3, "alt_tiled",
                   {"tiles": [14, 2], "ot": 16, "it": 1}),
)

COLUMNS = ("case", "kernel", "batch", "mb", "ms", "gbs", "pct_copy", "copy_ms", "pct_adjacent_copy", "verified")


#: the least bytes a conversion moves (read + written), in last-level caches, so no case runs from
#: the cache (measured: benchmarks/results/2026-11-27-beyond-llc): an LRU cache keeps nothing of a
#: cyclic sweep larger than itself, and the half more is for a replacement policy that keeps some
LLC_TIMES = 1.5


def last_level_cache() -> int:
    """The machine's last-level data cache, in bytes (``ceilings.cache_info``)."""
    return max(cache_info()[0].values())


def scaled_batch(nbytes: int, least: int) -> int:
    """The factor (a power of two) by which a conversion moving ``nbytes`` is batched to move at
    least ``least``."""
    factor = 1
    while nbytes * factor < least:
        factor *= 2
    return factor


def case_conversions(case: ConversionCase, target: dict) -> list[tuple[str, Any, Any]]:
    """The case's conversion kernels: (name, unscheduled PrimFunc, PrimFunc with its analytic
    schedule)."""
    from workbench.engine.schedules.policy import scheduled_funcs

    b = GraphBuilder(case.name)
    x = b.input("data", case.shape)
    w = b.const("conv.weight", (case.out_channels, case.shape[1], *[case.kernel] * (len(case.shape) - 2)))
    b.op("conv", f"conv{len(case.shape) - 2}d", x, w, stride=case.stride, padding=case.padding)
    graph = b.build()
    if case.preset == "alt_tiled":
        acts = preset_actions(graph, case.preset, "conv", **case.params)
    else:
        acts = [s for key in ("data@conv", "conv") for s in preset_actions(graph, case.preset, key, **case.params)]
    prog = make_program(graph, apply_actions(graph, LayoutBook(), acts))
    scheduled = scheduled_funcs(prog, target)  # the policy's: each conversion on its analytic schedule
    return [(k.name, prog.funcs[k.name], scheduled[k.name]) for k in prog.plan.kernels if k.conversion is not None]


def _compile(func: Any, target: dict) -> Callable[..., None]:
    return codegen.compile(tvm.IRModule({"main": func}), target).jit()["main"]


def _random_args(func: Any, rng: np.random.Generator) -> list[Any]:
    return [tvm.runtime.tensor(rng.random([int(n) for n in p.shape], dtype=np.float32)) for p in func.params]


def _measure(name: str, kernel: str, raw: Any, scheduled: Any, target: dict, copy_gbs: float, rounds: int) -> dict:
    rng = np.random.default_rng(0)
    fn, args = _compile(scheduled, target), _random_args(scheduled, rng)
    fn(*args)
    want = _random_args(raw, rng)
    want[0] = args[0]
    _compile(raw, target)(*want)
    verified = bool(np.array_equal(args[-1].numpy(), want[-1].numpy()))
    nbytes = buffer_bytes(scheduled)
    elems = nbytes // 8 // 16 * 16  # copy: half the bytes read, half written
    copy = stream_copy(elems)
    copy_fn, copy_args = _compile(copy, target), _random_args(copy, rng)
    samples = interleaved_samples({"conversion": call_timer(lambda: fn(*args)),
                                   "copy": call_timer(lambda: copy_fn(*copy_args))}, rounds)
    ms, copy_ms = float(np.median(samples["conversion"])), float(np.median(samples["copy"]))
    adjacent = float(np.median([c * nbytes / (elems * 8) / k for c, k in zip(samples["copy"], samples["conversion"])]))
    gbs = nbytes / ms / 1e6
    return dict(case=name, kernel=kernel, mb=nbytes / 1e6, ms=ms, gbs=gbs, pct_copy=100 * gbs / copy_gbs,
                copy_ms=copy_ms, pct_adjacent_copy=100 * adjacent, verified=verified)


def batched_conversions(case: ConversionCase, target: dict, least: int) -> list[tuple[str, int, Any, Any]]:
    """``case_conversions`` of ``case``, each conversion from the case batched to move at least
    ``least`` bytes (``scaled_batch``; its steps made for that size): (name, batch, unscheduled
    PrimFunc, PrimFunc with its analytic schedule). Each batch of the case is built once."""
    built = {1: case_conversions(case, target)}
    found = []
    for kernel, raw, _ in built[1]:
        factor = scaled_batch(buffer_bytes(raw), least)
        if factor not in built:
            built[factor] = case_conversions(replace(case, shape=(case.shape[0] * factor, *case.shape[1:])), target)
        _, raw, scheduled = next(c for c in built[factor] if c[0] == kernel)
        found.append((kernel, case.shape[0] * factor, raw, scheduled))
    return found


def run_conversion_bench(cases: tuple[ConversionCase, ...], out_dir: Path, target: dict, *, rounds: int = ROUNDS,
                         least_bytes: int | None = None,
                         on_step: Callable[[str], None] | None = None) -> list[dict]:
    """Check and time every conversion of ``cases``, each batched to move at least ``least_bytes``
    (default: ``LLC_TIMES`` the last-level cache); write ``conversions.csv`` and ``conversions.md``
    to ``out_dir`` (after each conversion: a long run keeps what it measured)."""
    copy_gbs = get_ceilings(target).copy_gbs
    least = int(LLC_TIMES * last_level_cache()) if least_bytes is None else least_bytes
    rows: list[dict] = []
    for case in cases:
        for kernel, batch, raw, scheduled in batched_conversions(case, target, least):
            rows.append({"batch": batch, **_measure(case.name, kernel, raw, scheduled, target, copy_gbs, rounds)})
            write_conversion_results(rows, out_dir, copy_gbs, least)
            if on_step:
                on_step(f"{case.name} {kernel}")
    return rows


def write_conversion_results(rows: list[dict], out_dir: Path, copy_gbs: float,
                             least_bytes: int | None = None) -> tuple[Path, Path]:
    """``conversions.csv`` and ``conversions.md`` (the table, the machine's copy ceiling and the
    least bytes a conversion was batched to move)."""
    least = f" Each conversion batched to move at least {least_bytes / 1e6:.4g} MB (last-level cache: " \
        f"{last_level_cache() / 2**20:.4g} MiB)." if least_bytes else ""
    return write_tables(out_dir, "conversions", COLUMNS, rows,
                        f"Machine: {machine_name()}; STREAM copy ceiling {copy_gbs:.1f} GB/s.{least} Each conversion "
                        "timed in turn with a copy of the same bytes; medians of the rounds.", _lowest(rows))


def _lowest(rows: list[dict]) -> str:
    """The summary line: the conversion furthest from the copy beside it and from the ceiling."""
    def low(key: str) -> str:
        got = [r for r in rows if r.get(key) is not None]
        if not got:
            return "missing (no conversion measured)"
        r = min(got, key=lambda r: r[key])
        return f"{r[key]:.0f}% ({r['case']} {r['kernel']})"

    unverified = [f"{r['case']} {r['kernel']}" for r in rows if not r.get("verified")]
    return (f"Lowest, of the copy beside it: {low('pct_adjacent_copy')}; of the copy ceiling: {low('pct_copy')}."
            + (f" Not verified: {', '.join(unverified)}." if unverified else ""))
