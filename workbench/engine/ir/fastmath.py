"""Vectorizable float32 ``exp``, ``erf``, ``sigmoid`` and ``tanh`` as TIR expressions.

Why: LLVM lowers TIR's ``exp``/``erf``/``tanh`` to calls of libm's scalar ``expf``/``erff``/``tanhf``,
one call per lane even inside a vectorized loop, which dominated BERT's GELU epilogues and
softmax (measured: benchmarks/results/2026-11-25-networks-all). These are TVM's own
approximations, with its constants (``topi.fast_exp``: Cephes' polynomial after a range
reduction by powers of two; ``topi.fast_erf``: Eigen's rational function), which TVM offers only
as whole-tensor ops; written as expressions here they fuse into a producer's epilogue like any
element-wise op. Other dtypes keep TVM's exact intrinsics.
"""

from __future__ import annotations

from tvm import te, tirx

__all__ = ["fast_exp", "fast_erf", "fast_sigmoid", "fast_tanh"]

_EXP_POLY = (1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1)
_ERF_NUM = (-2.72614225801306e-10, 2.77068142495902e-08, -2.10102402082508e-06, -5.69250639462346e-05,
            -7.34990630326855e-04, -2.95459980854025e-03, -1.60960333262415e-02)  # x^13 ... x^1
_ERF_DEN = (-1.45660718464996e-05, -2.13374055278905e-04, -1.68282697438203e-03, -7.37332916720468e-03,
            -1.42647390514189e-02)  # x^8 ... x^0


def _c(v: float) -> tirx.PrimExpr:
    return tirx.const(v, "float32")


def _f32(x: tirx.PrimExpr) -> bool:
    """Whether ``x`` is float32 (a tensor element has ``dtype``, other expressions ``ty``)."""
    return str(x.dtype if hasattr(x, "dtype") else x.ty) == "float32"


def _horner(x: tirx.PrimExpr, coeffs: tuple[float, ...]) -> tirx.PrimExpr:
    acc = _c(coeffs[0])
    for c in coeffs[1:]:
        acc = acc * x + _c(c)
    return acc


def fast_exp(x: tirx.PrimExpr) -> tirx.PrimExpr:
    """``exp(x)``: exp(f) by a polynomial on [-ln2/2, ln2/2] times 2^n built in the exponent bits
    (``topi.fast_exp``); relative error below 1e-6 for |x| < 20 (a softmax's x <= 0), 1e-5 up to the
    float32 limit; 0 below x = -88."""
    if not _f32(x):
        return te.exp(x)
    xc = te.max(te.min(x, _c(88.3762626647950)), _c(-88.3762626647949))
    n = te.floor(xc * _c(1.44269504088896341) + _c(0.5))
    f = xc - n * _c(0.6931471805599453)
    y = _horner(f, _EXP_POLY) * f * f + f + _c(1.0)
    two_n = tirx.reinterpret("float32", tirx.shift_left(tirx.Cast("int32", n + _c(127.0)), tirx.const(23, "int32")))
    return te.max(two_n * y, x)  # exp(x) >= 0 > x below the clamp: the max keeps the clamp's 2^-127 * y out


def fast_erf(x: tirx.PrimExpr) -> tirx.PrimExpr:
    """``erf(x)``: Eigen's rational approximation on [-4, 4] (``topi.fast_erf``); absolute error
    below 1e-6."""
    if not _f32(x):
        return tirx.erf(x)
    xc = te.max(te.min(x, _c(4.0)), _c(-4.0))
    x2 = xc * xc
    return xc * _horner(x2, _ERF_NUM) / _horner(x2, _ERF_DEN)


def fast_sigmoid(x: tirx.PrimExpr) -> tirx.PrimExpr:
    """``1 / (1 + exp(-x))`` with ``fast_exp``."""
    if not _f32(x):
        return te.sigmoid(x)
    return _c(1.0) / (_c(1.0) + fast_exp(-x))


def fast_tanh(x: tirx.PrimExpr) -> tirx.PrimExpr:
    """``tanh(x) = 1 - 2 / (exp(2x) + 1)`` with ``fast_exp``: absolute error about 1e-7 (the
    form loses relative precision only where |tanh| is far below 1e-3)."""
    if not _f32(x):
        return te.tanh(x)
    return _c(1.0) - _c(2.0) / (fast_exp(x * _c(2.0)) + _c(1.0))
