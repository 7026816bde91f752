#!/usr/bin/env bash
# Refresh docs/dashboard.png (the README's screenshot): the end-to-end history test runs real reviews in a scratch
# repository, builds the dashboard from that ledger and saves its main page from headless Chromium (about 3 min).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --dev
OPGATE_DASHBOARD_SCREENSHOT="$PWD/docs/dashboard.png" .venv/bin/python -m pytest -q -s tests/test_history_e2e.py
ls -l docs/dashboard.png
