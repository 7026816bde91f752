#!/usr/bin/env bash
# One command that proves opgate's GPU path on a GPU machine (an H200 lent for a few minutes, bare).
#
#   bash scripts/gpu-check.sh [--quick] [--budget SECONDS] [--steps a,b] [--out DIR] [--list]
#
# Steps, most telling first, each passed / failed / skipped with its reason in gpu-check.md (a failure
# never stops the steps after it; a step that does not fit the budget is skipped and says so):
#   machine  a GPU torch sees, nvcc, ncu          setup    opgate + dependencies from .whl/ (no network)
#   sandbox  bubblewrap with the GPU, CUDA inside  build    every kernel's CUDA and CPU extension, timed
#   cases    every cuda case vs its reference     bench    kernels vs torch.matmul / SDPA / 4.8 TB/s
#   ncu      Nsight Compute metrics (full only)   review   opgate review A/A per kernel (full only)
#   example  review of examples/changes (full)    pytest   pytest -m gpu (full only)
# --quick: machine … bench on the headline cases (about 5 minutes). Default budget 450 s (fits 8 minutes).
# Output: reports/gpu-check/ (gpu-check.md, gpu-check.json, kernels_vs_torch.{md,json}, logs/); where $OUT
# is set (the device machine), those four files and gpu-check-logs.tar.gz (every log) go into $OUT.
#
# On the CPU machine first (PyPI reachable): bash scripts/gpu-wheels.sh   → .whl/ (git-ignored, ~19 MiB)
# Then, from the checkout's session, one device call:
#   run(command="bash scripts/gpu-check.sh", carry=[".whl"], timeout_s=570)
# (the --quick variant: command="bash scripts/gpu-check.sh --quick", timeout_s=420). The printed
# summary is the end of the reply; every file is under files_at. See benchmarks/README.md, "H200".
# PYTHON selects the interpreter that has CUDA torch (default python3); opgate is installed into its
# environment (a throwaway machine): a --system-site-packages venv made from a venv would not see torch.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
python="${PYTHON:-python3}"
if ! command -v "$python" >/dev/null 2>&1; then
  echo "gpu-check: no $python on the PATH (set PYTHON to the interpreter that has CUDA torch)" >&2
  exit 2
fi
exec "$python" -m scripts.gpucheck "$@"
