#!/usr/bin/env bash
# Download, on a machine with PyPI, the wheels `scripts/gpu-check.sh` installs on a GPU machine that has no
# network: opgate's runtime dependencies (pyproject.toml, less torch) for CPython 3.12 on x86-64 Linux,
# with their dependencies, into .whl/ (git-ignored). The GPU machine's image already holds torch, numpy and
# the CUDA wheels; those are left out (they are large, and the machine's own must be used).
#
#   bash scripts/gpu-wheels.sh [--python-version 3.12] [--dest .whl]
#
# Then carry the folder with the check (see benchmarks/README.md, "H200"): device run with
# carry [".whl"]. The folder must stay well under the 64 MiB a device call may carry (about 20 MiB).
set -euo pipefail
cd "$(dirname "$0")/.."

pyver="3.12"
dest=".whl"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --python-version) pyver="${2:?--python-version needs a value}"; shift 2 ;;
    --dest) dest="${2:?--dest needs a value}"; shift 2 ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    *) echo "gpu-wheels: unknown argument: $1 (see --help)" >&2; exit 2 ;;
  esac
done

python="${PYTHON:-python3}"
# Projects the GPU image already has (KINDS.md's package list) whose wheels are large: never carried.
image_has='^(torch|numpy|triton|nvidia-.*|sympy|networkx|mpmath|setuptools|filelock|fsspec)$'

mapfile -t requirements < <("$python" - <<'EOF'
import tomllib
deps = tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]
for dep in deps:
    name = dep.split(";")[0].strip()
    if not name.lower().startswith("torch"):
        print(name)
EOF
)

platforms=()
for tag in manylinux_2_34 manylinux_2_28 manylinux_2_27 manylinux_2_17 manylinux2014 manylinux1; do
  platforms+=(--platform "${tag}_x86_64")
done

mkdir -p "$dest"
find "$dest" -maxdepth 1 -type f -name '*.whl' -delete  # a fresh set: one version of each project
echo "gpu-wheels: ${requirements[*]} (CPython $pyver, x86-64 Linux) into $dest/" >&2
"$python" -m pip download --quiet --disable-pip-version-check --only-binary=:all: \
  --python-version "$pyver" --implementation cp "${platforms[@]}" -d "$dest" "${requirements[@]}"

# Leave out what the image provides; keep one version of each project (two stop the whole install there).
declare -A seen=()
for wheel in "$dest"/*.whl; do
  file="$(basename "$wheel")"
  project="$(echo "${file%%-*}" | tr '[:upper:]_.' '[:lower:]--')"
  if [[ "$project" =~ $image_has ]]; then
    rm -f "$wheel"
    continue
  fi
  if [[ -n "${seen[$project]:-}" ]]; then
    echo "gpu-wheels: two versions of $project: ${seen[$project]} and $file" >&2
    exit 1
  fi
  seen[$project]="$file"
done

count="$(find "$dest" -maxdepth 1 -type f -name '*.whl' | wc -l)"
size="$(du -sm "$dest" | cut -f1)"
echo "gpu-wheels: $count wheels, ${size} MiB in $dest/:" >&2
ls "$dest" >&2
if [[ "$size" -gt 40 ]]; then
  echo "gpu-wheels: $dest is ${size} MiB; a device call carries 64 MiB in all" >&2
  exit 1
fi
