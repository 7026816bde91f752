"""The resource gate reads what the build compiles (issue 24, item 4): the build's own nvcc flags, torch's
COMMON_NVCC_FLAGS included, proven equal to `cuobjdump --dump-resource-usage` of an object compiled as torch
compiles it; and the attack that hid spills behind a define only the real build sets fails."""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from bot.config.manifest import load_kernel
from bot.review.resource_check import resource_check
from bot.untrusted.sandbox import Sandbox
from tests.conftest import git, repo_config_toml
from tests.flashmla_repo import KERNEL, make_flashmla_repo

pytestmark = [pytest.mark.slow, pytest.mark.untimed]
NVCC = shutil.which("nvcc")
needs_nvcc = pytest.mark.skipif(NVCC is None, reason="nvcc is not on the PATH")

# Under the real build's -D__CUDA_NO_HALF_OPERATORS__ (torch's COMMON_NVCC_FLAGS) the minimum of 4 blocks per
# SM caps registers at 64 and the 200 live values spill; a compile without torch's flags sees 1 block, ~207
# registers and no spill.
HOG = """\
#ifdef __CUDA_NO_HALF_OPERATORS__
#define MIN_BLOCKS 4
#else
#define MIN_BLOCKS 1
#endif
#define N 200
__global__ void __launch_bounds__(256, MIN_BLOCKS) hog(const float* __restrict__ x, float* __restrict__ y, int n) {
  float acc[N];
#pragma unroll
  for (int i = 0; i < N; ++i) acc[i] = x[threadIdx.x + i * 256];
  for (int k = 0; k < n; ++k) {
#pragma unroll
    for (int i = 0; i < N; ++i) acc[i] = acc[i] * acc[(i + 7) % N] + 1.0f;
  }
  float s = 0.f;
#pragma unroll
  for (int i = 0; i < N; ++i) s += acc[i] * (i + 1);
  y[threadIdx.x] = s;
}
"""
MANIFEST = """\
name = "halfbound"
domain = "deepgemm"
globs = ["kernels/halfbound/**"]

[build.cpu]
sources = ["hog_cpu.cpp"]
entry = "hog"

[build.cuda]
sources = ["hog.cu"]
cuda_cflags = ["-O3", "-gencode=arch=compute_90a,code=sm_90a"]
entry = "hog"

[[cases]]
name = "one"
"""


def _cuobjdump() -> str | None:
    if found := shutil.which("cuobjdump"):
        return found
    spec = importlib.util.find_spec("nvidia")  # the nvidia-cuda-cuobjdump wheel (a dev dependency)
    roots = list(spec.submodule_search_locations or []) if spec is not None else []
    found = [str(c) for root in roots for c in sorted(Path(root).glob("cu*/bin/cuobjdump"))]
    return found[0] if found else None


def _kernel_folder(root: Path) -> Path:
    folder = root / "kernels" / "halfbound"
    folder.mkdir(parents=True)
    (folder / "kernel.toml").write_text(MANIFEST)
    (folder / "hog.cu").write_text(HOG)
    (folder / "hog_cpu.cpp").write_text("int hog() { return 0; }\n")
    (folder / "tile_config.json").write_text("{}\n")
    return folder


def _usage(cuobjdump: str, obj: Path) -> dict[str, dict[str, int]]:
    """Mangled function -> {REG, STACK, SHARED, LOCAL} of the sm_90a code in an object."""
    out = subprocess.run([cuobjdump, "--dump-resource-usage", str(obj)], capture_output=True, text=True, check=True)
    found = {}
    for name, fields in re.findall(r"Function (\S+):\n\s+(.*)", out.stdout):
        found[name.rstrip(":")] = {k: int(v) for k, v in re.findall(r"([A-Z]+):(\d+)", fields)}
    return found


def _torch_compile(source: Path, flags: list[str], includes: list[Path], out: Path) -> Path:
    """The object as torch.utils.cpp_extension compiles a .cu: its COMMON_NVCC_FLAGS, then the extension's flags."""
    from torch.utils import cpp_extension

    assert NVCC is not None
    cmd = [NVCC, *cpp_extension.COMMON_NVCC_FLAGS, *flags, *(f"-I{d}" for d in includes), "-c", str(source)]
    subprocess.run([*cmd, "-o", str(out)], check=True, capture_output=True, cwd=source.parent)
    return out


@needs_nvcc
def test_a_launch_bound_that_only_the_real_builds_defines_tighten_spills_and_fails(tmp_path, build_dir):
    kernel = load_kernel(_kernel_folder(tmp_path))
    check = resource_check(kernel, None, build_dir / "resources", Sandbox.detect())
    assert check is not None and check.status == "ok", check
    [hog] = check.head
    assert hog.registers <= 64 and hog.spill_store_bytes > 0 and hog.stack_bytes > 0  # not 207 registers, 0 spill


@needs_nvcc
@pytest.mark.skipif(_cuobjdump() is None, reason="cuobjdump not installed (pip install nvidia-cuda-cuobjdump)")
@pytest.mark.parametrize("shape", ["attack", "flashmla"])
def test_opgates_figures_equal_cuobjdump_of_the_object_torch_builds(tmp_path, build_dir, shape):
    if shape == "attack":
        kernel = load_kernel(_kernel_folder(tmp_path))
        includes: list[Path] = []
    else:
        repo, _ = make_flashmla_repo(tmp_path)
        kernel = load_kernel(repo.path / KERNEL, path=KERNEL)
        includes = [repo.path / d for d in kernel.manifest.build["cuda"].include_dirs]
    spec = kernel.manifest.build["cuda"]
    [source] = [kernel.folder / s for s in spec.sources if s.endswith(".cu")]
    obj = _torch_compile(source, [*spec.cuda_cflags, f"-I{kernel.folder}"], includes, tmp_path / "real.o")
    cuobjdump = _cuobjdump()
    assert cuobjdump is not None
    [(mangled, real)] = _usage(cuobjdump, obj).items()
    check = resource_check(kernel, None, build_dir / "resources", Sandbox.detect())
    assert check is not None and check.status == "ok", check.log_tail
    [ours] = check.head
    assert (ours.registers, ours.stack_bytes) == (real["REG"], real["STACK"]), mangled
    # cuobjdump's SHARED counts the 1 KiB sm_90 reserves for a block that uses shared memory or a barrier
    assert real["SHARED"] - ours.smem_bytes in (0, 1024)


@needs_nvcc
def test_the_attack_fails_the_review(opgate, tmp_path):
    """The red-team form: a pull request adds the define-dependent minimum to a resource-only kernel."""
    repo_path = tmp_path / "repo"
    folder = _kernel_folder(repo_path)
    (folder / "hog.cu").write_text(HOG.replace("MIN_BLOCKS 4", "MIN_BLOCKS 1", 1))  # base: 1 block either way
    (folder / "kernel.toml").write_text(MANIFEST.split("[[cases]]")[0])  # resource-only
    (repo_path / "opgate.toml").write_text(repo_config_toml())
    git(repo_path, "init", "-q", "-b", "main")
    git(repo_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "root")
    git(repo_path, "add", "-A")
    git(repo_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "base")
    base = git(repo_path, "rev-parse", "HEAD")
    (folder / "hog.cu").write_text(HOG)
    git(repo_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "min blocks under torch's flags")
    run = opgate("review", "--repo", str(repo_path), "--base", base, "--head", "HEAD", "--offline")
    assert run.code == 1, run.stdout + run.stderr
    kernel = run.kernel("halfbound")
    assert kernel["verdict"] == "fail"
    assert any(r.startswith("resource: hog(") and " spills " in r for r in kernel["reasons"]), kernel["reasons"]
