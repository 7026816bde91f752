"""The timing loop's choices that do not need a kernel (bot/untrusted/runner/sampler.py); `block_order` and the loop
itself are exercised through the judge in tests/test_judge.py and tests/test_buffers.py."""

from __future__ import annotations

from bot.untrusted.runner import protocol
from bot.untrusted.runner.sampler import BLOCK_MS, MAX_CALLS, calls_per_block


def test_a_block_fills_its_length_up_to_the_cap_each_call_with_a_set_of_its_own():
    assert calls_per_block(call_ms=BLOCK_MS / 3, tensors_per_set=2, draw_per_set_s=1e-4) == 3
    assert calls_per_block(call_ms=0.01, tensors_per_set=2, draw_per_set_s=1e-4) == MAX_CALLS
    assert calls_per_block(call_ms=10 * BLOCK_MS, tensors_per_set=2, draw_per_set_s=1e-4) == 1  # never zero calls


def test_sets_that_carry_output_and_scratch_buffers_all_fit_one_input_file():
    """mul(A, B, C, s, workspace): 5 tensors a set. A 0.2 ms call once made 50 calls over 12 sets (64 header entries),
    so 38 calls saw a set an earlier call had written (issue 50, 1); now a block of it has 50 sets in one file."""
    n = calls_per_block(call_ms=0.2, tensors_per_set=5, draw_per_set_s=1e-4)
    assert n == MAX_CALLS and n * 5 <= protocol.MAX_TENSORS
    # Wider sets make the block shorter rather than share sets between its calls:
    assert calls_per_block(call_ms=0.2, tensors_per_set=20, draw_per_set_s=1e-4) == protocol.MAX_TENSORS // 20
    assert calls_per_block(call_ms=0.2, tensors_per_set=400, draw_per_set_s=1e-4) == 1


def test_sets_that_are_slow_to_draw_make_a_shorter_block():
    assert calls_per_block(call_ms=0.2, tensors_per_set=2, draw_per_set_s=0.4) == 2  # 1 s of drawing per block
    # A FlashMLA-shaped CPU case: 2.2 ms a call, 88 ms to draw a set: its block stays 9 calls, ~20 ms
    assert calls_per_block(call_ms=2.2, tensors_per_set=6, draw_per_set_s=0.088) == 9
