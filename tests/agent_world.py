"""What the agent tests share: a kernel change, the local gateway, a ledger and a run of one agent."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.agent.run import ask
from bot.config.manifest import load_kernel
from bot.config.settings import load_settings
from bot.ledger import Ledger, open_ledger
from bot.models.diff import FileChange
from tests.conftest import REPO_CONFIG
from tests.gateway import Gateway

ROOT = Path(__file__).resolve().parent.parent


KERNEL = load_kernel(ROOT / "kernels" / "deepgemm_tile", config=REPO_CONFIG)


CONFIG_DIFF = (
    "diff --git a/kernels/deepgemm_tile/tile_config.json b/kernels/deepgemm_tile/tile_config.json\n"
    "--- a/kernels/deepgemm_tile/tile_config.json\n+++ b/kernels/deepgemm_tile/tile_config.json\n"
    '@@ -1 +1 @@\n-{"tile_m": 128}\n+{"tile_m": 256}\n'
)


def change(path: str, diff: str | None = None) -> FileChange:
    return FileChange(path=path, old_path=path, added=1, removed=1, diff=diff if diff is not None else f"+{path}\n")


KEY = "sk-test-client-4f1c9a7e2b6d8a0c3e5f"


VARIABLE = "TAOTOKEN_API_KEY_DEEPGEMM_AGENT"


class Sleeps(list[float]):
    def __call__(self, seconds: float) -> None:
        self.append(seconds)


@pytest.fixture
def gateway(httpserver) -> Gateway:
    return Gateway(httpserver)


@pytest.fixture(params=["sqlite", "postgresql"])
def ledger(request: pytest.FixtureRequest, tmp_path: Path):
    url = str(tmp_path / "l.sqlite") if request.param == "sqlite" else request.getfixturevalue("pg_url")
    with open_ledger(url) as led:
        yield led


@pytest.fixture
def sqlite_ledger(tmp_path: Path):
    with Ledger(tmp_path / "l.sqlite") as led:
        yield led


def run_ask(gateway: Gateway, ledger: Ledger, tmp_path: Path, changes=None, **env: str):
    settings = load_settings(
        {VARIABLE: KEY, "TAOTOKEN_BASE_URL": gateway.url, "OPGATE_AGENT_BACKOFF_S": "0", "GITHUB_TOKEN": "", **env},
        REPO_CONFIG,
    )
    return ask(
        KERNEL,
        changes if changes is not None else [change("kernels/deepgemm_tile/tile_config.json", CONFIG_DIFF)],
        settings=settings,
        ledger=ledger,
        head_sha="f" * 40,
        pr=12,
        offline=False,
        candidates_dir=tmp_path / "agent_candidates",
        sleep=Sleeps(),
    )
