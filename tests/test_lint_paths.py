"""Which files `opgate lint` reads and how (bot/lint/paths.py): dispatch by name, the kernel's domain, the folder walk,
kind detection."""

from __future__ import annotations

from pathlib import Path

from bot.lint import (
    detect_kind,
    lint_paths,
)
from tests.lint_texts import BOOK, CANARY, CLAUDE_OK, one, rules, task_text


def test_lint_paths_dispatches_by_name_and_reads_the_kernel_domain(tmp_path: Path) -> None:
    kernel = tmp_path / "kernels" / "fm"
    kernel.mkdir(parents=True)
    (kernel / "kernel.toml").write_text('name = "fm"\ndomain = "flashmla"\n')
    (kernel / "agent_task.json").write_text(task_text())  # a DEEPGEMM variable in a flashmla kernel
    (tmp_path / ".env.example").write_text(f"TAOTOKEN_API_KEY_DEEPGEMM_AGENT={CANARY}\n")
    (tmp_path / "notes.txt").write_text("hello\n")
    (tmp_path / "config.toml").write_text('model = "x"\n')  # named on the command line: linted as Codex
    findings = lint_paths(
        book=BOOK,
        paths=[
            kernel / "agent_task.json",
            tmp_path / ".env.example",
            tmp_path / "notes.txt",
            tmp_path / "missing.toml",
            tmp_path / "config.toml",
            tmp_path,  # the files again, through the folder: each is linted once
        ],
    )
    assert one(findings, "TASK004").path.endswith("agent_task.json")
    assert one(findings, "ENV001").path.endswith(".env.example")
    assert one(findings, "LINT002").path.endswith("notes.txt")
    assert one(findings, "LINT001").path.endswith("missing.toml")
    assert one(findings, "CODEX002").path.endswith("config.toml")


def test_folder_walk_picks_only_known_kinds(tmp_path: Path) -> None:
    (tmp_path / ".vscode").mkdir()
    (tmp_path / ".vscode" / "settings.json").write_text('{"editor.tabSize": 4}\n')
    (tmp_path / "cargo").mkdir()
    (tmp_path / "cargo" / "config.toml").write_text("[build]\njobs = 4\n")
    (tmp_path / "README.md").write_text("# hi\n")
    (tmp_path / "claude").mkdir()
    (tmp_path / "claude" / "settings.json").write_text(CLAUDE_OK.replace("YOUR_TAOTOKEN_API_KEY", CANARY))
    findings = lint_paths([tmp_path])
    assert rules(findings) == {"CLAUDE004"}


def test_detect_kind() -> None:
    assert detect_kind(".env") == detect_kind(".env.example") == "env"
    assert detect_kind("kernels/x/agent_task.json") == "task"
    assert detect_kind("flashmla_task.json", '{"task_id": "x"}') == "task"
    assert detect_kind("flashmla_task.json", '{"tasks": []}') is None
    assert detect_kind(".claude/settings.local.json") == "claude"
    assert detect_kind(".codex/config.toml") == "codex"
    assert detect_kind("pyproject.toml") is None
