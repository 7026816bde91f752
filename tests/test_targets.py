"""Which GPU targets this runner's nvcc compiles (bot/untrusted/targets.py), against a stand-in nvcc that prints
what `nvcc --list-gpu-code` prints: an architecture outside its list is named with the list, an nvcc that cannot
say is tried anyway, and the list is asked once per nvcc."""

from __future__ import annotations

import stat
from pathlib import Path

from bot.untrusted.targets import gpu_codes, unsupported


def fake_nvcc(folder: Path, stdout: str, code: int = 0) -> str:
    """An executable that answers `--list-gpu-code` like nvcc and counts how often it was asked."""
    folder.mkdir(parents=True, exist_ok=True)
    nvcc = folder / "nvcc"
    nvcc.write_text(f"#!/bin/sh\necho x >> {folder / 'calls'}\nprintf '{stdout}'\nexit {code}\n")
    nvcc.chmod(nvcc.stat().st_mode | stat.S_IXUSR)
    return str(nvcc)


def test_an_architecture_outside_the_list_is_named_with_the_list(tmp_path: Path) -> None:
    nvcc = fake_nvcc(tmp_path / "cuda12", "sm_80\\nsm_86\\nsm_90\\n")
    assert gpu_codes(nvcc) == ("sm_80", "sm_86", "sm_90")
    assert unsupported("sm_90a", nvcc) is None  # sm_90a runs on sm_90
    reason = unsupported("sm_100a", nvcc)
    assert reason is not None and reason.startswith("this runner's nvcc cannot compile for sm_100a")
    assert "(`nvcc --list-gpu-code`: sm_80, sm_86, sm_90)" in reason and "install a CUDA toolkit" in reason
    assert (tmp_path / "cuda12" / "calls").read_text().count("x") == 1  # asked once for this nvcc


def test_an_nvcc_that_cannot_list_its_targets_is_tried_anyway(tmp_path: Path) -> None:
    old = fake_nvcc(tmp_path / "old", "nvcc fatal: Unknown option\\n", code=1)
    assert gpu_codes(old) is None and unsupported("sm_100a", old) is None
    missing = str(tmp_path / "nowhere" / "nvcc")
    assert gpu_codes(missing) is None and unsupported("sm_100a", missing) is None
