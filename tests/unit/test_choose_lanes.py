"""fused_hmc.lanes.choose_lanes: the lanes="auto" choice (no compiling, no GPU).

row_partials and check_lanes: tests/unit/test_block_lanes.py."""
from __future__ import annotations

import pytest

from fused_hmc.lanes import (
    BLOCK_ROWS,
    ROWS_PER_LANE,
    WARP_LANES,
    WARPS_PER_SM,
    choose_lanes,
    row_partials,
)


@pytest.mark.parametrize("sms", [1, 16, 108, 132])
@pytest.mark.parametrize("chains", [1, 64, 1000, 1024, 4096, 10_000, 16_384, 65_536, 1 << 20])
def test_the_smallest_power_of_two_that_fills_the_gpu(chains, sms):
    lanes = choose_lanes(chains, sms, 5000)
    full = WARPS_PER_SM * 32 * sms
    assert lanes in (1, 2, 4, 8, 16, 32)
    assert chains * lanes >= full or lanes == WARP_LANES  # full, or as many lanes as a warp has
    assert lanes == 1 or chains * (lanes // 2) < full  # and no more lanes than that takes


def test_known_answers_on_an_h200():
    """132 SMs: 33,792 threads fill it at 8 warps an SM."""
    assert [choose_lanes(c, 132, 5000) for c in (1024, 4096, 16_384, 65_536)] == [32, 16, 4, 1]
    assert choose_lanes(1000, 132, 1192) == 32


@pytest.mark.parametrize("rows, cap", [(1, 1), (7, 1), (8, 2), (37, 8), (127, 16), (128, 32),
                                       (65_535, 32)])
def test_at_least_rows_per_lane_rows_a_lane(rows, cap):
    assert choose_lanes(1, 132, rows) == cap
    assert cap == 1 or cap * ROWS_PER_LANE <= rows


@pytest.mark.parametrize("chains", [1, 132, 4096, 1 << 20])
@pytest.mark.parametrize("rows", [BLOCK_ROWS, 262_144, 10**7])
def test_large_data_takes_a_block_a_chain(chains, rows):
    """From BLOCK_ROWS rows on, P = 256 and every chain takes a block of 256 lanes, whatever the
    chain count and GPU."""
    assert row_partials(rows) == 256
    assert choose_lanes(chains, 132, rows) == choose_lanes(chains, 16, rows) == 256


@pytest.mark.parametrize("arg", ["chains", "sm_count", "rows"])
@pytest.mark.parametrize("bad", [0, -3, 2.0, True, None])
def test_bad_arguments_are_named(arg, bad):
    kwargs = dict(chains=16, sm_count=132, rows=100) | {arg: bad}
    with pytest.raises(ValueError, match=rf"{arg} must be a positive int, got {bad!r}"):
        choose_lanes(**kwargs)
