"""The timing loop's choices that do not need a kernel (bot/untrusted/runner/sampler.py); `block_order` and the loop
itself are exercised through the judge in tests/test_judge.py and tests/test_buffers.py."""

from __future__ import annotations

from bot.untrusted.runner import protocol
from bot.untrusted.runner.sampler import MAX_SETS, sets_per_block


def test_a_block_gets_one_input_set_per_call_up_to_the_cap():
    assert sets_per_block(calls=3, tensors_per_set=2, draw_per_set_s=1e-4) == 3
    assert sets_per_block(calls=50, tensors_per_set=2, draw_per_set_s=1e-4) == MAX_SETS


def test_sets_that_carry_output_and_scratch_buffers_still_fit_one_input_file():
    """mul(A, B, C, s, workspace): 5 tensors a set. 16 sets are 80 header entries, which the worker refuses (it exited
    70 during timing on an idle runner, where blocks hold enough calls to ask for 16 sets)."""
    n = sets_per_block(calls=50, tensors_per_set=5, draw_per_set_s=1e-4)
    assert n == protocol.MAX_TENSORS // 5 and n * 5 <= protocol.MAX_TENSORS
    assert sets_per_block(calls=50, tensors_per_set=200, draw_per_set_s=1e-4) == 1  # never zero sets


def test_sets_that_are_slow_to_draw_are_fewer():
    assert sets_per_block(calls=50, tensors_per_set=2, draw_per_set_s=0.1) == 2  # 0.25 s of drawing per block
