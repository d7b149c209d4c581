"""What the paired studies in ``benchmarks/results`` share: an engine module of an older commit
(the conversion schedules, the expert template), imported beside the working tree's, and the
target from the command line; and the paired study of conversion schedules
(``paired_conversions``: an older commit's steps against the working tree's).

Run a study from the repository root (``PYTHONPATH=. python benchmarks/results/<study>/<script>``)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import tempfile
from pathlib import Path
from types import ModuleType


def old_module(module: str, rev: str = "HEAD") -> ModuleType:
    """Module ``module`` (``workbench.engine.schedules.conversion.steps``) as it was at ``rev`` (git), as a
    module of its own beside the working tree's."""
    source = subprocess.check_output(["git", "show", f"{rev}:{module.replace('.', '/')}.py"], text=True)
    path = Path(tempfile.mkdtemp()) / f"{module.rsplit('.', 1)[-1]}_old.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(f"{module}_old", path)
    loaded = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = loaded
    spec.loader.exec_module(loaded)
    return loaded


def old_convert(rev: str = "HEAD") -> ModuleType:
    """``workbench.engine.schedules.conversion.steps`` as it was at ``rev``."""
    return old_module("workbench.engine.schedules.conversion.steps", rev)


def target_and_args(argv: list[str]) -> tuple[dict, list[str]]:
    """The study's target (the host's CPU, 2 cores; ``--mcpu X`` builds for X) and the other arguments."""
    args, target = list(argv), {"kind": "llvm", "num-cores": 2}
    if "--mcpu" in args:
        i = args.index("--mcpu")
        target["mcpu"] = args[i + 1]
        del args[i:i + 2]
    return target, args


def timed_in_turn(raw, variants: dict, target: dict, rounds: int, copy: bool = False) -> dict:
    """Each variant's steps applied to the conversion ``raw``, built, checked against the
    unscheduled kernel on random data, and timed in turn with the others (and with a STREAM copy
    of the same bytes, ``"copy"``, when ``copy``): the samples per name (ms). A variant TVM
    refuses is left out, with a line saying why."""
    import math

    import numpy as np

    from workbench.bench.suite import call_timer
    from workbench.engine.measure.ceilings import stream_copy
    from workbench.bench.conversions import _compile, _random_args
    from workbench.engine.base.interleave import interleaved_samples
    from workbench.engine.loops.primitives import apply_steps

    rng = np.random.default_rng(0)
    want = _random_args(raw, rng)
    _compile(raw, target)(*want)
    timers = {}
    for name, steps in variants.items():
        try:
            func = apply_steps(raw, steps).mod["main"]
        except Exception as e:  # noqa: BLE001 - a variant TVM refuses
            print(name, "fails:", str(e)[:300])
            continue
        fn, args = _compile(func, target), _random_args(func, rng)
        args[0] = want[0]
        fn(*args)
        assert np.array_equal(args[-1].numpy(), want[-1].numpy()), name
        timers[name] = call_timer(lambda fn=fn, args=args: fn(*args))
    if copy:
        nbytes = sum(4 * math.prod(int(n) for n in p.shape) for p in raw.params)
        cp = stream_copy(nbytes // 8 // 16 * 16)
        cf, cargs = _compile(cp, target), _random_args(cp, rng)
        timers["copy"] = call_timer(lambda: cf(*cargs))
    return interleaved_samples(timers, rounds)


#: our TIR pipeline as it was before ``SmallBuffersOnStack`` (``2026-11-27-stack``)
BEFORE_STACK = "before_stack"


def _register_before_stack() -> None:
    import tvm

    from workbench.engine.build import codegen as cg

    passes = tuple(p for p in cg.PASSES if p is not cg.SmallBuffersOnStack)
    tvm.tirx.register_tir_pipeline(BEFORE_STACK, cg.pipeline_of(passes))


def stack_moves(func, target: dict) -> bool:
    """Whether ``SmallBuffersOnStack`` moves a buffer of ``func`` (registers ``BEFORE_STACK``)."""
    import tvm

    from workbench.engine.build import codegen as cg
    from workbench.engine.build.targets import target_from

    _register_before_stack()
    tgt = target_from(target)
    before = tvm.tirx.get_tir_pipeline(BEFORE_STACK)[0](
        tvm.tirx.transform.BindTarget(tgt.with_host(tgt))(tvm.IRModule({"main": func})))["main"]
    return not cg.small_buffers_on_stack(before).same_as(before)


def stack_timers(func, target: dict, rng) -> dict:
    """Timers of ``func`` built through ``BEFORE_STACK`` (``"before"``) and our pipeline
    (``"now"``), their results checked bit-equal on the same random data."""
    import numpy as np
    import tvm

    from workbench.engine.build import codegen as cg
    from workbench.bench.suite import call_timer
    from workbench.bench.conversions import _random_args
    from workbench.engine.build.targets import target_from

    _register_before_stack()
    a0, timers, outs = _random_args(func, rng), {}, {}
    for name, pipe in (("before", BEFORE_STACK), ("now", cg.PIPELINE)):
        fn = tvm.compile(tvm.IRModule({"main": func}), target=target_from(target), tir_pipeline=pipe).jit()["main"]
        args = [tvm.runtime.tensor(v.numpy()) for v in a0]
        fn(*args)
        outs[name] = args[-1].numpy()
        timers[name] = call_timer(lambda fn=fn, args=args: fn(*args))
    assert np.array_equal(outs["before"], outs["now"])
    return timers


def _suite_conversions(target: dict) -> list[tuple[str, str, object]]:
    """(name, kernel, unscheduled PrimFunc) of every conversion of the suite's workloads x presets,
    batch 1."""
    from workbench.bench.suite import load_suite, workload_graph
    from workbench.engine.layout.book import LayoutBook
    from workbench.engine.layout.keys import apply_actions
    from workbench.engine.layout.presets import preset_actions
    from workbench.engine.build.program import make_program

    funcs = []
    for w in load_suite("benchmarks/suite.json"):
        g, op = workload_graph(w)
        for preset in ("alt_tiled", "blocked", "channels_last", "nkn"):
            try:
                prog = make_program(g, apply_actions(g, LayoutBook(), preset_actions(g, preset, op)))
            except Exception:  # noqa: BLE001 - a preset the workload does not take
                continue
            funcs += [(f"{w.name}/{preset}", k, f) for k, f in prog.funcs.items() if k.startswith("convert")]
    return funcs


def paired_conversions(rev: str, argv: list[str]) -> None:
    """Print, for each conversion whose steps differ between ``rev``'s ``expert.convert`` (old) and
    the working tree's (new), both timed in turn with a copy of the same bytes: the conversions
    benchmark's cases (as it batches them: beyond the last-level cache) and the suite's workloads
    x presets (batch 1). ``argv``: ROUNDS [--mcpu X] [--suite-only | --cases-only]."""
    import numpy as np

    import workbench.engine.schedules.conversion.steps as new
    from workbench.engine.measure.conversion_rates import buffer_bytes
    from workbench.bench.conversions import CASES, LLC_TIMES, batched_conversions, last_level_cache

    old = old_convert(rev)
    target, args = target_and_args(argv)
    rounds = int(args[0])
    funcs = []
    if "--suite-only" not in args:
        least = int(LLC_TIMES * last_level_cache())  # batched as the conversions benchmark batches them
        funcs += [(case.name, k, raw) for case in CASES for k, _, raw, _ in batched_conversions(case, target, least)]
    if "--cases-only" not in args:
        funcs += _suite_conversions(target)
    same = 0
    for name, k, raw in funcs:
        so, sn = old.conversion_steps(raw, k, target), new.conversion_steps(raw, k, target)
        if so == sn:
            same += 1
            continue
        s = timed_in_turn(raw, {"old": so, "new": sn}, target, rounds, copy=True)
        if "old" not in s or "new" not in s:
            continue  # (timed_in_turn said which TVM refused)
        nbytes = buffer_bytes(raw)
        pct = {n: np.median([100 * c / v for c, v in zip(s["copy"], s[n])]) for n in ("old", "new")}
        ratio = [o / n for o, n in zip(s["old"], s["new"])]
        print(f"{name:26s} {k:18s} {nbytes / 1e6:7.2f}MB old {np.median(s['old']) * 1e3:9.1f}us ({pct['old']:3.0f}%) "
              f"new {np.median(s['new']) * 1e3:9.1f}us ({pct['new']:3.0f}%) old/new {np.median(ratio):.2f} "
              f"({min(ratio):.2f}-{max(ratio):.2f})", flush=True)
    print(len(funcs), "conversions,", same, "with the same steps")
