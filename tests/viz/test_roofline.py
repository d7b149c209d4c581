"""The roofline figure (``viz.roofline``): the library's GEMMs as reference points."""

from __future__ import annotations

import pytest

from workbench.engine.measure.ceilings import Ceilings, Yardstick
from workbench.viz.roofline import roofline_figure


def test_roofline_labels_the_library_gemms_as_reference_points():
    yards = (Yardstick("NumPy", 2048, 80.0, 2), Yardstick("PyTorch", 2048, 169.0, 2))
    c = Ceilings("cpu", {"kind": "llvm"}, peak_gflops=100.0, copy_gbs=10.0, triad_gbs=12.0, caches={"L1d": 32768},
                 line_bytes=64, library=yards)
    fig = roofline_figure([], c)
    refs = [t for t in fig.data if t.legendgroup == "library"]
    assert [t.name for t in refs] == ["NumPy GEMM 2048 (library)", "PyTorch GEMM 2048 (library)"]
    assert [t.text[0] for t in refs] == ["NumPy GEMM 2048", "PyTorch GEMM 2048"] and refs[1].mode == "markers+text"
    assert refs[1].x[0] == pytest.approx(2048 / 6) and refs[1].y[0] == 169.0
    assert 10 ** fig.layout.yaxis.range[1] > 169.0  # a library above the measured roof stays in view
    plain = roofline_figure([], Ceilings(**{**c.to_json(), "library": ()}))
    assert not [t for t in plain.data if t.legendgroup == "library"]
