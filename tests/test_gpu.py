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
    # an unused function: other bytes, the same behaviour (a comment alone compiles to base's very ext.so: not timed)
    path.write_text(path.read_text() + '\nextern "C" int opgate_no_op_marker() { return 40; }\n')
    head = repo.commit()
    run = opgate("review", "--repo", str(repo.path), "--base", repo.base, "--head", head, "--offline", timeout=3600)
    kernel = run.kernel(name)
    assert kernel["build"]["device"] == "cuda" and kernel["build"]["ok"], kernel["build"]["log_tail"]
    cuda = [c for c in kernel["cases"] if c["device"] == "cuda"]
    assert cuda and all(c["status"] == "ok" and c["max_abs_err"] <= c["tolerance"] for c in cuda), cuda
    assert all(c["p50_ms"] > 0 and c["base_p50_ms"] > 0 for c in cuda)
    assert run.report["environment"]["gpu"]


SIDE_STREAM = """
extern "C" int PyRun_SimpleString(const char* command);
namespace {
// Make the harness's device-wide synchronize a no-op, so the batch "ends" while the side stream still works.
const int opgate_redteam_patch = PyRun_SimpleString(
    "import torch\\ntorch.cuda.synchronize = lambda *args, **kwargs: None\\n");
cudaStream_t side_stream() {
  static cudaStream_t s = [] { cudaStream_t t; cudaStreamCreateWithFlags(&t, cudaStreamNonBlocking); return t; }();
  return s;
}
}  // namespace
"""


def test_a_kernel_that_keeps_the_gpu_busy_after_its_batch_is_caught(opgate, tmp_path):
    """The red-team case that needs a GPU: work on a side stream the patched synchronize never waits for."""
    repo = make_repo(tmp_path / "repo", ["deepgemm_tile"])
    path = repo.path / "kernels/deepgemm_tile/gemm_cuda.cu"
    text = path.read_text()
    marker = "kernel<<<grid, Cfg::kThreads, Cfg::kSmemBytes, stream>>>"
    assert marker in text
    text = text.replace(marker, "kernel<<<grid, Cfg::kThreads, Cfg::kSmemBytes, side_stream()>>>")
    text = text.replace('#include "gemm_cuda.h"', '#include "gemm_cuda.h"\n' + SIDE_STREAM, 1)
    path.write_text(text)
    head = repo.commit()
    run = opgate("review", "--repo", str(repo.path), "--base", repo.base, "--head", head, "--offline", timeout=3600)
    cuda = [c for c in run.kernel("deepgemm_tile")["cases"] if c["device"] == "cuda"]
    assert cuda and all(c["verdict"] in ("fail", "error") for c in cuda), cuda
    assert any("still busy" in r or "differ from the reference" in r for c in cuda for r in c["reasons"]), cuda
