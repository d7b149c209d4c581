"""Paired: the conversion steps of aa833da (old) vs the working tree's (new, _whole_rows), on the conversions
benchmark's cases and the suite's workloads x presets (batch 1), each timed in turn with a copy. (Until Nov 27
the cases kept their own batches: 51-411 MB; now they are batched beyond the last-level cache.)
usage: PYTHONPATH=. python benchmarks/results/2026-11-27-whole-rows/paired.py ROUNDS [--mcpu X] [--suite-only|--cases-only]"""
import sys

from benchmarks.paired_setup import paired_conversions

paired_conversions("aa833da", sys.argv[1:])  # the order model before _whole_rows
