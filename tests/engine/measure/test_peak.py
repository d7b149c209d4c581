"""The peak kernel: sized from the target's vector unit, its hot loop vector FMAs without spills
in the assembly (an oversized control spills), and the clock of the theoretical peak."""

from __future__ import annotations

import platform

import pytest

from workbench.engine.build.asm import innermost_loops, stack_accesses
from workbench.engine.build.targets import DEFAULT_TARGET, vector_unit
from workbench.engine.measure import peak
from workbench.engine.measure.peak import PeakKernel, peak_kernel_shape

x86 = pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="checks x86 assembly")


@pytest.mark.parametrize("mcpu", ["znver3", "haswell", "skylake-avx512", "x86-64"])
def test_peak_kernel_fills_the_fma_pipes_within_the_register_file(mcpu):
    target = {"kind": "llvm", "mcpu": mcpu}
    shape, unit = peak_kernel_shape(target), vector_unit(target)
    assert (shape.lanes, shape.registers, shape.isa) == (unit.lanes, unit.registers, unit.isa)
    assert shape.accumulators + shape.constants + 1 <= shape.registers
    assert shape.accumulators == min(peak.FMA_PORTS * peak.FMA_LATENCY, unit.registers - shape.constants - 1)


def _fma_loop(asm: str) -> list[str]:
    loops = [lp for lp in innermost_loops(asm) if any(i.startswith("vfmadd") for i in lp)]
    assert len(loops) == 1, f"expected one innermost loop with FMAs, found {len(loops)}"
    return loops[0]


@x86
@pytest.mark.parametrize("target", [DEFAULT_TARGET, {"kind": "llvm", "mcpu": "znver3", "num-cores": 2},
                                    {"kind": "llvm", "mcpu": "skylake-avx512", "num-cores": 2}],
                         ids=["host", "znver3", "skylake-avx512"])
def test_peak_kernel_hot_loop_is_vector_fmas_without_spills(target):
    shape = peak_kernel_shape(target)
    if shape.isa not in ("AVX2", "AVX-512"):
        pytest.skip(f"no FMA on {shape.isa}")
    loop = _fma_loop(peak.peak_kernel_asm(target))
    reg = {8: "%ymm", 16: "%zmm"}[shape.lanes]
    fmas = [i for i in loop if i.startswith("vfmadd")]
    assert len(fmas) >= shape.accumulators and all(i.count(reg) == 3 for i in fmas)
    assert len({i.split(",")[-1].strip() for i in fmas}) == shape.accumulators  # one register per chain
    assert stack_accesses(loop) == []


@x86
def test_the_old_sixteen_lane_kernel_spills_on_avx2():
    """The control: 8 chains of 16 lanes (two ymm each) and 2 constants overflow 16 registers."""
    old = PeakKernel(lanes=16, accumulators=8, constants=2, registers=16, isa="AVX2")
    spills = stack_accesses(_fma_loop(peak.peak_kernel_asm({"kind": "llvm", "mcpu": "znver3"}, old)))
    assert spills and all("ymm" in i for i in spills)


def test_innermost_loops_are_found_in_att_assembly():
    asm = "\n".join(["f:", ".LBB0_1:", "\tvmovups (%rdi), %ymm0", ".LBB0_2:", "\t.loc 1 2 3",
                     "\tvfmadd213ps %ymm1, %ymm2, %ymm0", "\tvmovups %ymm3, 16(%rsp)", "\tdecl %ecx",
                     "\tjne .LBB0_2", "\tjmp .LBB0_1", "\tretq"])
    (inner,) = innermost_loops(asm)
    assert inner == ["vfmadd213ps %ymm1, %ymm2, %ymm0", "vmovups %ymm3, 16(%rsp)", "decl %ecx", "jne .LBB0_2"]
    assert stack_accesses(inner) == ["vmovups %ymm3, 16(%rsp)"]


def test_clock_comes_from_cpufreq_then_cpuinfo(tmp_path):
    freq, info = tmp_path / "cpufreq", tmp_path / "cpuinfo"
    info.write_text("model name\t: X\ncpu MHz\t\t: 2445.406\n")
    ghz, src = peak.cpu_clock(freq, info)
    assert ghz == pytest.approx(2.445406) and "cpu MHz" in src
    freq.mkdir()
    (freq / "cpuinfo_max_freq").write_text("3500000\n")
    assert peak.cpu_clock(freq, info) == (3.5, f"{freq}/cpuinfo_max_freq")
    ghz, src = peak.cpu_clock(tmp_path / "none", tmp_path / "none")
    assert ghz == 0.0 and src.startswith("unknown")
