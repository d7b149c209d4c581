"""The memory roof's kernels and sizes: STREAM's copy copies, and the bandwidth arrays are 4x the
last-level cache within 64-256 MiB."""

from __future__ import annotations

import numpy as np
import tvm

from workbench.engine.build.targets import DEFAULT_TARGET
from workbench.engine.measure.memory import MIB, stream_bytes, stream_copy
from workbench.engine.measure.peak import build_main


def test_the_stream_copy_kernel_copies():
    a = np.random.default_rng(0).random((64, 16), dtype=np.float32)
    b = tvm.runtime.tensor(np.zeros_like(a))
    build_main(stream_copy(a.size), DEFAULT_TARGET)["main"](tvm.runtime.tensor(a), b)
    np.testing.assert_array_equal(b.numpy(), a)


def test_the_bandwidth_arrays_are_four_times_the_last_level_cache_within_bounds():
    assert stream_bytes({"L1d": 32 * 1024, "L2": MIB, "L3": 32 * MIB}) == 128 * MIB
    assert stream_bytes({"L2": MIB, "L3": 8 * MIB}) == 64 * MIB  # a small cache: at least 64 MiB
    assert stream_bytes({"L3": 512 * MIB}) == 256 * MIB  # a huge one: capped, to keep the measurement short
