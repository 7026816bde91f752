"""Each example domain's review prompt in tokens (cl100k_base, opgate's offline estimate) beside the users' table.

For the three kernels of this repository, two changes each (a tunable in the config file; one line inside the
kernel's main CUDA function, so its enclosing function goes in whole from base and head), the prompt as sent —
trimmed to the domain's per-request budget in the domain's material order — with and without base's figures in
main's history (a history of one main commit recorded into a scratch ledger: every case and a compiled function
per architecture, figures made up for the size only), beside the prompt before the materials (task and diff only)
and the users' average input per request. Then `opgate tune`'s prompt for the same kernels: its first round (no
trials yet) and its sixth (five judged candidates in the table), before the materials, with them and no history,
and with a recorded history.

    .venv/bin/python benchmarks/agent_prompt.py
"""

from __future__ import annotations

import difflib
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bot.agent import estimate, prompt  # noqa: E402
from bot.agent.materials import Sources  # noqa: E402
from bot.agent.run import gather  # noqa: E402
from bot.config.manifest import Kernel, load_kernel  # noqa: E402
from bot.config.repo import load_config  # noqa: E402
from bot.config.settings import load_settings  # noqa: E402
from bot.ledger import Ledger  # noqa: E402
from bot.mainline.record import MainCommit, ResourceFigure  # noqa: E402
from bot.mainline.store import History  # noqa: E402
from bot.models.ledger import CaseFigure  # noqa: E402
from bot.review.changes import parse_diff  # noqa: E402
from bot.tune import agent as tune_agent  # noqa: E402
from bot.tune import space  # noqa: E402
from bot.tune.model import candidate_label  # noqa: E402

# The users' token table: average input per request of each task.
USERS_AVERAGE = {"deepgemm": 2_500, "flashmla": 3_000, "v41_attention": 4_000}
# kernel, its tunable change, (CUDA file, a line inside the function the source change edits)
EXAMPLES = {
    "deepgemm_tile": ({"tile_n": 256}, ("gemm_cuda.cu", "gemm_bf16_kernel")),
    "flashmla_decode": ({"block_n": 32}, ("decode_cuda.cu", "mla_decode_kernel")),
    "v41_attention_splitk": ({"split_k": 8}, ("attention_cuda.cu", "splitk_merge_kernel")),
}
BASE = "b" * 40


def diff(path: str, old: str, new: str) -> str:
    lines = difflib.unified_diff(
        old.splitlines(keepends=True), new.splitlines(keepends=True), f"a/{path}", f"b/{path}", n=3
    )
    return f"diff --git a/{path} b/{path}\n" + "".join(lines)


def config_change(kernel: Kernel, update: dict[str, int]) -> tuple[str, Sources]:
    path = f"{kernel.path}/{kernel.manifest.config}"
    old = (ROOT / path).read_text()
    new = json.dumps({**json.loads(old), **update}) + "\n"
    return diff(path, old, new), Sources(base={path: old}, head={path: new})


def source_change(kernel: Kernel, file: str, function: str) -> tuple[str, Sources]:
    path = f"{kernel.path}/{file}"
    old = (ROOT / path).read_text()
    lines = old.split("\n")
    at = next(i for i, line in enumerate(lines) if function in line and "(" in line)
    body = next(i for i in range(at, len(lines)) if lines[i].rstrip().endswith("{")) + 1
    new = "\n".join([*lines[:body], "  // a one-line change inside the function", *lines[body:]])
    return diff(path, old, new), Sources(base={path: old}, head={path: new})


def record_history(ledger: Ledger, kernel: Kernel) -> None:
    commit = MainCommit(sha=BASE, base_sha="c" * 40, committed_at="2026-12-01T10:00:00+00:00")
    cases = [
        CaseFigure(
            sha=BASE, base_sha="c" * 40, kernel=kernel.name, domain=kernel.manifest.domain, case_name=c.name,
            device=c.device, device_name="cpu" if c.device == "cpu" else "NVIDIA H200 · sm_90", p50_ms=1.234,
            base_p50_ms=1.230, regression_pct=0.3, ci_low_pct=-0.8, ci_high_pct=1.4, max_abs_err=0.0039,
            verdict="pass", committed_at=commit.committed_at,
        )
        for c in kernel.manifest.cases
    ]  # fmt: skip
    resources = [
        ResourceFigure(sha=BASE, kernel=kernel.name, function=f"{kernel.name}_kernel<128, 64, 2>", arch=arch,
                       registers=128, smem_bytes=49152, threads=256, committed_at=commit.committed_at)
        for arch in kernel.manifest.constraints.architectures
        for _ in range(2)
    ]  # fmt: skip
    History(ledger).record(commit, cases, resources)


def before(kernel: Kernel, text: str, budget: int) -> int:
    """The prompt before issue 39: the task, its constraints, the config and the diff, no material."""
    return prompt.trim(kernel, parse_diff(text), budget, estimate.count_messages).prompt_tokens


def sent(kernel: Kernel, text: str, sources: Sources, ledger: Ledger, budget: int) -> tuple[int, str]:
    settings = load_settings({"GITHUB_TOKEN": ""}, load_config(ROOT))
    changes = parse_diff(text)
    pieces, missing = gather(kernel, kernel, changes, settings, ledger, sources, BASE)
    trimmed = prompt.trim(kernel, changes, budget, estimate.count_messages, pieces, [line for line, _ in missing])
    cut = ", ".join(trimmed.pieces_left_out) or "nothing"
    return trimmed.prompt_tokens, cut


def tune_prompt(kernel: Kernel, ledger: Ledger | None, budget: int, rounds: int) -> tuple[int, str]:
    """Tune's prompt in tokens at round `rounds` + 1 (that many candidates in its table); `ledger` None: without the
    materials (before issue 39's tune part)."""
    settings = load_settings({"GITHUB_TOKEN": ""}, load_config(ROOT))
    text = (ROOT / kernel.path / kernel.manifest.config).read_text()
    configs = [c for c in space.configs(kernel.manifest.tunables) if c != kernel.config][:rounds]
    rows = [
        tune_agent.TableRow(
            round=i + 1, label=candidate_label(space.config_key(c), c), verdict="pass", speedup=f"x{1 + i / 100:.3f}",
            cases="; ".join(f"{case.name} {-1.0 - i:+.1f}% [{-2.0 - i:+.1f}, {-0.1 - i:+.1f}] pass"
                            for case in kernel.manifest.cases),
            resources=f"{kernel.name}_kernel: 128 regs, 0 B spill, 49,152 B smem, 8 warps/SM", errors="—",
        )
        for i, c in enumerate(configs)
    ]  # fmt: skip
    view = tune_agent.View(round=rounds + 1, max_rounds=6, tokens_left=50_000, seen=rounds + 1,
                           space_size=space.size(kernel.manifest.tunables), rows=rows, notes=[])  # fmt: skip
    name, values = next(iter(kernel.manifest.tunables.items()))
    other = next(v for v in values if v != kernel.config.get(name))
    example = (space.config_patch(kernel, text, {**kernel.config, name: other}), f"{name}={other}")
    pieces, missing = (
        gather(kernel, kernel, [], settings, ledger, None, BASE, leave_out=tune_agent.TUNE_LEAVES_OUT)
        if ledger is not None
        else ([], [])
    )
    messages = tune_agent.messages(
        kernel,
        view,
        config_text=text,
        example=example,
        limit=budget,
        pieces=pieces,
        not_available=[line for line, _ in missing],
    )
    user = messages[1]["content"]
    cut = user.split("Left out of this prompt for size (the per-request budget): ", 1)
    return estimate.count_messages(messages), cut[1].split(".\n", 1)[0] if len(cut) == 2 else "nothing"


def tune_table(scratch: str) -> None:
    config = load_config(ROOT)
    print()
    head = f"{'tune: domain':<14} {'round':<7} {'before':>7} {'no history':>10} {'history':>8} {'users avg':>9}"
    print(f"{head} {'budget':>7}  left out (with history)")
    for name in EXAMPLES:
        kernel = load_kernel(ROOT / "kernels" / name, config=config, path=f"kernels/{name}")
        domain = kernel.manifest.domain
        budget = config.domains[domain].request_budget
        for rounds in (0, 5):
            old, _ = tune_prompt(kernel, None, budget, rounds)
            with Ledger(Path(scratch) / f"{name}-tune-empty.sqlite") as empty:
                bare, _ = tune_prompt(kernel, empty, budget, rounds)
            with Ledger(Path(scratch) / f"{name}-tune-history.sqlite") as ledger:
                record_history(ledger, kernel)
                full, cut = tune_prompt(kernel, ledger, budget, rounds)
            row = f"{domain:<14} {rounds + 1:<7} {old:>7,} {bare:>10,} {full:>8,} {USERS_AVERAGE[domain]:>9,}"
            print(f"{row} {budget:>7,}  {cut}")


def main() -> int:
    config = load_config(ROOT)
    head = f"{'domain':<14} {'change':<34} {'diff only':>9} {'no history':>10} {'history':>8} {'users avg':>9}"
    print(f"{head} {'budget':>7}  left out (with history)")
    with tempfile.TemporaryDirectory() as scratch:
        for name, (update, (file, function)) in EXAMPLES.items():
            kernel = load_kernel(ROOT / "kernels" / name, config=config, path=f"kernels/{name}")
            domain = kernel.manifest.domain
            budget = config.domains[domain].request_budget
            changes = {
                f"{kernel.manifest.config} {json.dumps(update)}": config_change(kernel, update),
                f"{file}: a line in {function}": source_change(kernel, file, function),
            }
            for label, (text, sources) in changes.items():
                with Ledger(Path(scratch) / f"{name}-empty.sqlite") as empty:
                    bare, _ = sent(kernel, text, sources, empty, budget)
                with Ledger(Path(scratch) / f"{name}-history.sqlite") as ledger:
                    record_history(ledger, kernel)
                    full, cut = sent(kernel, text, sources, ledger, budget)
                avg = USERS_AVERAGE[domain]
                old = before(kernel, text, budget)
                row = f"{domain:<14} {label[:34]:<34} {old:>9,} {bare:>10,} {full:>8,} {avg:>9,}"
                print(f"{row} {budget:>7,}  {cut}")
        tune_table(scratch)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
