#!/usr/bin/env bash
# Quick start (a): set up .venv, then run `opgate review` on the bundled example change to
# kernels/deepgemm_tile (examples/changes/deepgemm_tile_tile_n_256.patch) on the embedded defaults:
# SQLite ledger at reports/opgate.sqlite, report in reports/latest/, agent offline unless its key is set.
# The change is applied in a scratch clone of this checkout's HEAD; your working tree is never touched.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh

patch="${1:-examples/changes/deepgemm_tile_tile_n_256.patch}"
scratch="$(mktemp -d -t opgate-demo-XXXXXX)"
trap 'rm -rf "$scratch"' EXIT
git clone --quiet --no-hardlinks . "$scratch/repo"
git -C "$scratch/repo" apply "$PWD/$patch"
git -C "$scratch/repo" -c user.name=opgate-demo -c user.email=demo@opgate.local \
  commit --quiet -am "demo: $(basename "$patch")"

set +e
.venv/bin/opgate review --repo "$scratch/repo" --base HEAD~1 --head HEAD --out reports/latest
code=$?
set -e
# 0 pass and 1 fail are verdicts, not errors of the demo; 2 and 3 are.
[[ $code -le 1 ]] || exit $code
