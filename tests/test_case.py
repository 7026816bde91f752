"""One case as the judge sees it (bot/untrusted/runner/case.py): a side's outputs compared with the reference's."""

from __future__ import annotations

import pytest
import torch

from bot.config.manifest_tables import Limits
from bot.untrusted.runner.case import compare


def test_compare_keeps_the_headline_max_abs_err_over_every_output():
    check = compare([torch.ones(2), torch.zeros(3)], [torch.ones(2), torch.full((3,), 0.5)])
    assert check.max_abs_err == pytest.approx(0.5) and check.failure is None  # no limits: metrics only
    assert [o.name for o in check.outputs] == ["out0", "out1"]
    limited = compare([torch.ones(2)], [torch.zeros(2)], ["c"], Limits(max_abs_err=0.1))
    assert limited.failure is not None and limited.failure.output == "c" and limited.failure.index == [0]
