"""On a GPU runner: every kernel's CUDA build runs its `cuda` cases through `opgate review` (skipped elsewhere)."""

from __future__ import annotations

import pytest

from tests.conftest import make_repo
from tests.test_kernels import KERNELS

torch = pytest.importorskip("torch")

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.slow,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU and a CUDA build of torch"),
]


@pytest.mark.parametrize("name", list(KERNELS))
def test_every_cuda_case_is_correct_and_timed_on_the_gpu(opgate, tmp_path, name):
    _, cuda_body, _, _, _ = KERNELS[name]
    repo = make_repo(tmp_path / "repo", [name])
    path = repo.path / "kernels" / name / cuda_body
    path.write_text("// reviewed on the GPU runner: no behaviour change\n" + path.read_text())
    head = repo.commit()
    run = opgate("review", "--repo", str(repo.path), "--base", repo.base, "--head", head, "--offline", timeout=3600)
    kernel = run.kernel(name)
    assert kernel["build"]["device"] == "cuda" and kernel["build"]["ok"], kernel["build"]["log_tail"]
    cuda = [c for c in kernel["cases"] if c["device"] == "cuda"]
    assert cuda and all(c["status"] == "ok" and c["max_abs_err"] <= c["tolerance"] for c in cuda), cuda
    assert all(c["p50_ms"] > 0 and c["base_p50_ms"] > 0 for c in cuda)
    assert run.report["environment"]["gpu"]
