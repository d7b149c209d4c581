"""CPU-specific rules of the conversion schedules (``conversion.vendor``), by LLVM CPU name."""

from workbench.engine.schedules.conversion.vendor import register_tiles
from workbench.engine.build.targets import vector_unit


def test_register_tiles_for_gathered_rows_by_cpu():
    """AVX-512 (16 lanes) on any CPU and 8-lane targets other than AMD's Zen (``znver*``) move
    gathered rows through register tiles; Zen's 8 lanes and narrower vectors (SSE) keep the
    order model's gather."""
    cpu = lambda name: {"kind": "llvm", "mcpu": name}  # noqa: E731
    assert [register_tiles(cpu(n), vector_unit(cpu(n)).lanes)
            for n in ("skylake-avx512", "znver4", "haswell", "x86-64-v3", "znver3", "znver2", "nehalem")] == \
        [True, True, True, True, False, False, False]
