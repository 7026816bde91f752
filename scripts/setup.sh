#!/usr/bin/env bash
# Create .venv in the checkout and install opgate from it.
#   scripts/setup.sh         runtime only: opgate with its runner (torch, ninja, bubblewrap) — what a
#                            production runner needs to review from a checkout (no test tools, no apt)
#   scripts/setup.sh --dev   also the test and lint tools (pytest, ruff, mypy, actionlint, zizmor, …) and, as
#                            root with apt-get, PostgreSQL and Chromium for the ledger and dashboard tests
# On a machine without an NVIDIA GPU the CPU build of torch is installed first, so the `torch` requirement
# never pulls a multi-GB CUDA build. Override with OPGATE_TORCH_SPEC.
set -euo pipefail
cd "$(dirname "$0")/.."

mode=runtime
case "${1:-}" in
  "") ;;
  --dev) mode=dev ;;
  *) echo "usage: scripts/setup.sh [--dev]" >&2; exit 2 ;;
esac

python="${PYTHON:-python3}"
stamp=".venv/.opgate-setup"
want="$mode $(cat pyproject.toml scripts/setup.sh | sha256sum | cut -c1-16)"
if [[ -f "$stamp" ]] && { [[ "$(cat "$stamp")" == "$want" ]] || [[ "$mode" == runtime && "$(cat "$stamp")" == "dev ${want#runtime }" ]]; }; then
  exit 0  # up to date (a dev setup holds the runtime one)
fi

if [[ "$mode" == dev ]]; then
  # The ledger tests run on a throwaway PostgreSQL cluster too (tests/pg.py starts and stops it); install
  # Debian's server where it is missing and we may (root with apt-get), as on a fresh CI machine.
  if ! ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1 && [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null; then
    echo "setup: installing PostgreSQL (Debian's postgresql package) for the ledger tests" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
  fi
  # The dashboard tests open the site in headless Chromium (tests/browser.py); Debian's package, as for PostgreSQL.
  if ! command -v chromium >/dev/null && ! command -v chromium-browser >/dev/null && [[ "$(id -u)" == 0 ]] \
    && command -v apt-get >/dev/null; then
    echo "setup: installing Chromium (Debian's chromium package) for the dashboard tests" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  fi
  # A Chinese font, so the browser test and docs/comment-zh.png draw the zh-CN comment's characters (5 MB).
  if ! fc-list :lang=zh 2>/dev/null | grep -q . && [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null; then
    echo "setup: installing a Chinese font (Debian's fonts-wqy-microhei) for the zh-CN comment's screenshot" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq fonts-wqy-microhei >/dev/null
  fi
fi

[[ -x .venv/bin/python ]] || "$python" -m venv .venv
pip=(.venv/bin/python -m pip install --quiet --disable-pip-version-check)

if [[ -n "${OPGATE_TORCH_SPEC:-}" ]]; then
  torch_spec="$OPGATE_TORCH_SPEC"
elif command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  torch_spec="torch"
else
  torch_spec="torch==2.13.0"   # the CPU build (a local wheel on our CI machines)
fi
if ! .venv/bin/python -c "import torch" >/dev/null 2>&1; then
  echo "setup: installing $torch_spec" >&2
  "${pip[@]}" "$torch_spec"
fi
if [[ "$mode" == dev ]]; then
  "${pip[@]}" -e ".[dev]"
  # The comment test draws every mermaid chart in Chromium: mermaid.js from npm, fetched once (tests/comment_page.py).
  if command -v npm >/dev/null; then
    .venv/bin/python -c "from tests.comment_page import fetch_mermaid; fetch_mermaid()" >/dev/null 2>&1 \
      || echo "setup: could not fetch mermaid.js with npm; the chart test will skip" >&2
  fi
else
  "${pip[@]}" -e ".[runner]"
fi
echo "$want" > "$stamp"
