#!/usr/bin/env bash
# Quick start (b): set up .venv with the test tools (scripts/setup.sh --dev) and run every check: ruff, mypy,
# scripts/dead_names.py (no module-level name of bot/ that only tests read), opgate lint, the whole pytest suite
# (arguments, if any, go to one pytest run instead).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --dev
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy
.venv/bin/python scripts/dead_names.py
.venv/bin/opgate lint
if [ "$#" -gt 0 ]; then
    exec .venv/bin/python -m pytest "$@"
fi
# Every test, in two runs: the fast tests and the slow ones marked untimed (their assertions hold whatever the
# load; the `actions` group, the workflows run by act, among them) two at a time, one test file per worker, the
# files with the most slow tests first (tests/conftest.py); then
# the other slow tests, which judge a measured latency or CPU time, alone, so no other test loads the machine under
# them. Both runs always run; the exit status is the first failure's.
# The two runs share one build cache (tests/conftest.py's build_dir): the timed run builds no base twice.
OPGATE_TEST_BUILD_CACHE="$(mktemp -d)"
export OPGATE_TEST_BUILD_CACHE
trap 'chmod -R u+w "$OPGATE_TEST_BUILD_CACHE" 2>/dev/null || true; rm -rf "$OPGATE_TEST_BUILD_CACHE" || true' EXIT
status=0
.venv/bin/python -m pytest -n 2 --dist loadfile --no-loadscope-reorder -m "not slow or untimed" || status=$?
.venv/bin/python -m pytest -m "slow and not untimed" || { rc=$?; [ "$status" -ne 0 ] || status=$rc; }
exit "$status"
