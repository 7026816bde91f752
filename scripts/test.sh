#!/usr/bin/env bash
# Quick start (b): set up .venv with the test tools (scripts/setup.sh --dev) and run every check: ruff, mypy,
# opgate lint, the whole pytest suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --dev
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy
.venv/bin/opgate lint
.venv/bin/python -m pytest "$@"
