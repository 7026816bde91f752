"""Folding a launcher's constants (bot/untrusted/fold.py): the probe source and its PTX."""

from __future__ import annotations

from bot.untrusted.fold import fold_source, parse_folded


def test_the_probe_source_and_its_ptx():
    exprs = ["sizeof(Traits<cutlass::bfloat16_t>::SharedMemoryPlan)", "sizeof(float) * 4"]
    text = fold_source(["traits.h"], exprs)
    assert '#include "traits.h"' in text
    assert f"opgate_probe_1 = (unsigned long long)({exprs[1]});" in text
    ptx = ".global .align 8 .u64 opgate_probe_0 = 230816;\n.global .align 8 .u64 opgate_probe_1 = 16;\n"
    assert parse_folded(ptx, exprs) == {exprs[0]: 230816, exprs[1]: 16}
    assert parse_folded("", exprs) == {}
