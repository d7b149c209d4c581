"""The libraries a single operator is held against, and the process they are timed in.

The yardstick is the fastest library on the op, not one library: which library is fastest
depends on the CPU's vendor and the op, and a ratio against one library alone would measure
that library's code path more than our tuner. The contenders (``LIBRARIES``):

- ``torch``: PyTorch eager, the faster of the default (NCHW) and channels-last memory formats;
- ``numpy``: NumPy's ``@`` (GMM only);
- ``torch_compile``: ``torch.compile`` with inductor, ``freezing`` (the weight a constant) and the
  options of mode ``max-autotune-no-cudagraphs`` (``COMPILE_MODE``), its output checked against
  eager PyTorch's.

Each is made and sampled in the ``Sidecar`` process; one that cannot be made is *missing*, with
its reason, and the run goes on. ``fastest`` picks the library figure from the re-measured medians.
"""

from __future__ import annotations

import contextlib
import sys
import types
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping, Protocol

import numpy as np

from ..base.interleave import Timer, call_timer, interleaved_samples

__all__ = ["LIBRARIES", "LABELS", "COMPILE_MODE", "Sidecar", "torch_timer", "numpy_timer", "compile_timer",
           "library_timers", "fastest"]

#: the library contenders of the single-operator benchmark, in their interleaving order
LIBRARIES = ("torch", "numpy", "torch_compile")
#: how the results name each one (a timer's ``label`` may add detail, e.g. the memory format)
LABELS = {"torch": "PyTorch", "numpy": "NumPy", "torch_compile": "torch.compile"}
#: torch.compile's mode, whose options are taken (``mode`` and ``options`` exclude each other)
COMPILE_MODE = "max-autotune-no-cudagraphs"


class Workload(Protocol):
    """What the timers read of a ``bench.Workload``: PyTorch's op name and the operands' shapes."""

    op: str
    input: tuple[int, ...]
    weight: tuple[int, ...]
    attrs: dict


def _torch_op(w: Workload) -> tuple[Callable[..., Any], Any, Any, dict]:
    """The op as PyTorch calls it: (function, input, weight, keyword arguments), seeded random data."""
    import torch

    gen = torch.Generator().manual_seed(0)
    x, wt = torch.rand(w.input, generator=gen), torch.rand(w.weight, generator=gen)  # no autograd: nothing recorded
    if w.op == "matmul":
        return torch.matmul, x, wt, {}
    return getattr(torch.nn.functional, w.op), x, wt, {k: v for k, v in w.attrs.items() if k != "depthwise"}


def _labelled(timer: Timer, label: str) -> Timer:
    timer.label = label  # type: ignore[attr-defined]
    return timer


def torch_timer(w: Workload, threads: int) -> Timer:
    """PyTorch eager on ``threads`` threads, in the faster of the default (NCHW) and channels-last
    memory formats (chosen by the median of three samples each, interleaved, each once the machine
    is quiet: chosen right after our kernels ran, while TVM's pool still spun, one format's samples
    could come out several times slower than in another run)."""
    import torch

    torch.set_num_threads(threads)
    fn, x, wt, attrs = _torch_op(w)
    if w.op == "matmul":
        return _labelled(call_timer(lambda: fn(x, wt)), LABELS["torch"])
    formats = {"NCHW": torch.contiguous_format}
    if x.dim() in (4, 5):
        formats["channels-last"] = torch.channels_last if x.dim() == 4 else torch.channels_last_3d
    timers = {}
    for name, fmt in formats.items():
        xf, wf = x.contiguous(memory_format=fmt), wt.contiguous(memory_format=fmt)
        timers[name] = call_timer(lambda xf=xf, wf=wf: fn(xf, wf, **attrs))
    samples = interleaved_samples(timers, rounds=3)
    best = min(samples, key=lambda k: float(np.median(samples[k])))
    return _labelled(timers[best], f"{LABELS['torch']} ({best})")


def numpy_timer(w: Workload) -> Timer | None:
    """NumPy's ``@`` for a GMM; None for other ops."""
    if w.op != "matmul":
        return None
    rng = np.random.default_rng(0)
    a, b = rng.random(w.input, dtype=np.float32), rng.random(w.weight, dtype=np.float32)
    return _labelled(call_timer(lambda: a @ b), LABELS["numpy"])


def compile_timer(w: Workload, threads: int) -> Timer:
    """``torch.compile`` of the op with inductor, ``freezing`` and ``COMPILE_MODE``'s options, the
    weight a frozen parameter of a module; raises when its output differs from eager PyTorch's."""
    import torch
    from torch import _inductor

    torch.set_num_threads(threads)
    fn, x, wt, attrs = _torch_op(w)

    class Op(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.weight = torch.nn.Parameter(wt, requires_grad=False)

        def forward(self, inp: Any) -> Any:
            return fn(inp, self.weight, **attrs)

    module = Op().eval()
    compiled = torch.compile(module, backend="inductor",
                             options={**_inductor.list_mode_options(COMPILE_MODE), "freezing": True})
    with torch.no_grad():
        got, want = compiled(x), module(x)
    err, scale = float((got - want).abs().max()), max(1.0, float(want.abs().max()))
    if not err <= 1e-4 * scale:
        raise ValueError(f"its output differs from eager PyTorch's by {err:.3g} (largest value {scale:.3g})")

    def call() -> None:
        with torch.no_grad():
            compiled(x)

    return _labelled(call_timer(call), LABELS["torch_compile"])


#: each library contender's timer maker and whether it takes the thread count
_MAKERS: Mapping[str, tuple[Callable[..., Timer | None], bool]] = {
    "torch": (torch_timer, True), "numpy": (numpy_timer, False), "torch_compile": (compile_timer, True)}


def _sidecar_main(conn: Any) -> None:
    """The sidecar's loop: make timers (answering each one's label, None for no timer), answer
    samples; an error goes back as ("error", text)."""
    timers: dict[str, Timer | None] = {}
    while True:
        msg = conn.recv()
        try:
            if msg[0] == "make":
                _, key, make, args = msg
                timers[key] = t = make(*args)
                conn.send(("ok", None if t is None else str(getattr(t, "label", ""))))
            elif msg[0] == "sample":
                conn.send(("ok", float(timers[msg[1]]())))
            else:
                return
        except Exception as e:  # noqa: BLE001 - reported to the parent, which raises it
            conn.send(("error", f"{type(e).__name__}: {e}"))


@dataclass(frozen=True)
class _Remote:
    """A timer that lives in the sidecar: each call is one sample, taken there."""

    sidecar: "Sidecar"
    key: str
    label: str

    def __call__(self) -> float:
        return self.sidecar._ask(("sample", self.key))


@contextlib.contextmanager
def spawnable_main() -> Iterator[None]:
    """While a process is spawned, ``__main__`` is a bare module if it is a script with no spec:
    Streamlit runs the app's page that way, and a spawned child would run it again (as
    ``__mp_main__``: the whole app, TVM included) before doing its work."""
    main = sys.modules.get("__main__")
    if main is None or getattr(main, "__spec__", None) is not None or not getattr(main, "__file__", None):
        yield
        return
    bare = types.ModuleType("__main__")
    sys.modules["__main__"] = bare
    try:
        yield
    finally:
        if sys.modules.get("__main__") is bare:  # another script run may have set its own since
            sys.modules["__main__"] = main


class Sidecar:
    """PyTorch and NumPy timed in a process of their own, started before this process runs any
    TVM kernel or tuning: in a process where MetaSchedule had tuned, the thread pools of TVM,
    XGBoost and PyTorch compete for the cores and PyTorch's calls slow down. The parent still
    interleaves: each sample is one request to the sidecar, taken in its turn."""

    def __init__(self) -> None:
        import multiprocessing

        ctx = multiprocessing.get_context("spawn")
        self._conn, child = ctx.Pipe()
        self._proc = ctx.Process(target=_sidecar_main, args=(child,), daemon=True)
        with spawnable_main():
            self._proc.start()
        self._n = 0

    def _ask(self, msg: tuple) -> Any:
        self._conn.send(msg)
        status, got = self._conn.recv()
        if status == "error":
            raise RuntimeError(f"the timing sidecar failed: {got}")
        return got

    def timer(self, make: Callable[..., Timer | None], *args: Any) -> Timer | None:
        """The timer ``make(*args)`` returns, made and sampled in the sidecar (``make``: a
        module-level function, so that it pickles; its ``label``, if any, comes back as the
        timer's); None when it returns None."""
        self._n += 1
        key = f"t{self._n}"
        label = self._ask(("make", key, make, args))
        return None if label is None else _Remote(self, key, label)

    def close(self) -> None:
        try:
            self._conn.send(("stop",))
        except OSError:
            pass
        self._proc.join(10)
        if self._proc.is_alive():
            self._proc.kill()

    def __enter__(self) -> "Sidecar":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def library_timers(sidecar: Sidecar, w: Workload, threads: int,
                   names: tuple[str, ...] = LIBRARIES) -> tuple[dict[str, Timer], dict[str, str]]:
    """The timers of the library contenders ``names`` that apply to ``w`` (NumPy: GMM only), made
    in ``sidecar``, and the reason of each one that could not be made (missing, not fatal)."""
    timers: dict[str, Timer] = {}
    missing: dict[str, str] = {}
    for name in names:
        make, threaded = _MAKERS[name]
        try:
            t = sidecar.timer(make, w, *((threads,) if threaded else ()))
        except RuntimeError as e:  # the sidecar's report of the contender's own error
            missing[name] = str(e).removeprefix("the timing sidecar failed: ").splitlines()[0][:200]
            continue
        if t is not None:
            timers[name] = t
    return timers, missing


def fastest(medians: Mapping[str, float | None], labels: Mapping[str, str]) -> tuple[float | None, str]:
    """The fastest library contender's median ms and label (its ``labels`` entry, else ``LABELS``);
    (None, "") when none was measured."""
    got = {k: v for k, v in medians.items() if k in LIBRARIES and v}
    if not got:
        return None, ""
    best = min(got, key=lambda k: got[k])
    return got[best], labels.get(best) or LABELS[best]
