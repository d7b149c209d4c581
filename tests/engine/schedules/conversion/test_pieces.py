"""A conversion's loops cut into pieces (``conversion.pieces``): the vector run."""

import pytest

from workbench.engine.schedules.conversion.pieces import vector_run


@pytest.mark.parametrize("extents, run", [((29, 13, 13, 3), (1, 3)), ((9, 11, 4), (1, 4)), ((9, 10, 4), (2, 8)),
                                          ((5, 2, 2, 2), (3, 8))])
def test_the_vector_run_fuses_only_across_power_of_two_extents(extents, run):
    """Fused across a loop of 3 (channels of an image), every lane would divide by 3 and 13:
    the run stops at a loop whose extent is not a power of two."""
    assert vector_run(extents, 8) == run


def test_a_unit_innermost_loop_joins_the_vector_run():
    """ALT's stem input with it = 1 ends in C.i of 1 after the 9-wide W.w halo tile: the run is
    the W.w loop with the unit loops inside it, not the unit loop alone."""
    assert vector_run([5, 9, 1], 8) == (2, 9) and vector_run([9, 1, 1], 16) == (3, 9)
