"""Paired: the conversion steps of 79d9e3d (before Intel's AVX2 register tiles and _whole_lines_apart) vs the
working tree's, on the conversions benchmark's cases (beyond the last-level cache) and the suite's workloads x
presets (batch 1), each timed in turn with a copy.
usage: PYTHONPATH=. python benchmarks/results/2026-11-27-avx2-tiles/paired.py ROUNDS [--mcpu X] [--suite-only|--cases-only]"""
import sys

from benchmarks.paired_setup import paired_conversions

paired_conversions("79d9e3d", sys.argv[1:])
