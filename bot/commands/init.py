"""`opgate init`: scaffold opgate in a kernel repository (config, manifests, .env.example, the workflow caller)."""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jinja2

from bot import UPSTREAM, __version__, lint
from bot.commands import Commands
from bot.commands.scaffold import UNIT_SUFFIXES, holds_sources, propose
from bot.config.buildfiles import buildable, package_name
from bot.config.manifest import MANIFEST_NAME, ROOT, repo_file
from bot.config.repo import CONFIG_FILE, DOMAIN_NAME, VARIABLE_NAME, RepoConfig, default_key, load_config
from bot.edges import machine
from bot.errors import InputError
from bot.models.output import InitOutput
from bot.templates import TEMPLATES, environment
from bot.verdict.flags import nvcc_options
from bot.verdict.occupancy import family

GATEWAY = "https://taotoken.net/api"
WORKFLOW = Path(".github/workflows/opgate.yml")
GITIGNORE = ".gitignore"
IGNORED = ["/reports/latest/", "/reports/opgate.sqlite*"]  # what a local review writes by default
SHA = re.compile(r"[0-9a-f]{40}")
ARCH = re.compile(r"sm_[0-9]+[af]?")
LABEL = re.compile(r"[A-Za-z0-9_.-]+")  # a runner label


def register(commands: Commands) -> None:
    p = commands.add(
        "init",
        help="scaffold opgate in a kernel repository",
        description="Write opgate.toml (unless the repository has a configuration), a kernel.toml, reference.py and "
        "agent_task.json for each kernel folder without a manifest (sources found in its subfolders too; "
        "TORCH_LIBRARY ops become torch.ops entries), .env.example, the workflow caller "
        ".github/workflows/opgate.yml and .gitignore lines for opgate's outputs; then lint what it wrote and "
        "suggest opgate check. Existing files are kept (--force rewrites .env.example and the caller; never a "
        "configuration, a manifest, a reference or a source).",
    )
    p.add_argument("--repo", type=Path, default=Path("."), help="the repository (default: .)")
    p.add_argument(
        "--kernels",
        action="append",
        metavar="DIR",
        help="a folder holding one subfolder per kernel, or one kernel's own folder of sources (repeatable; "
        "default: kernels/ when it exists)",
    )
    p.add_argument(
        "--domain",
        help="agent domain of the new kernels (default: the package's name, setup.py's or pyproject.toml's, else the "
        "repository folder's)",
    )
    p.add_argument("--key", help="the domain's key variable (default: TAOTOKEN_API_KEY_<DOMAIN>_AGENT)")
    p.add_argument("--weekly-budget", type=int, default=200_000, help="tokens per week (default: 200000)")
    p.add_argument("--request-budget", type=int, default=8_000, help="prompt tokens per request (default: 8000)")
    p.add_argument("--branch", default="main", help="the default branch main's record follows (default: main)")
    p.add_argument("--source", default=UPSTREAM, help=f"OWNER/REPO of opgate's reusable workflows ({UPSTREAM})")
    p.add_argument(
        "--pin", metavar="SHA", help=f"the commit of opgate's release tag v{__version__} (default: the tag itself)"
    )
    p.add_argument(
        "--arch-runner",
        action="append",
        default=[],
        metavar="ARCH=LABEL,...",
        help="the review jobs of GPU architecture ARCH run on the runner with these labels (the caller's "
        "arch-runners), e.g. sm_100=self-hosted,linux,gpu,sm_100; repeatable; the others run on the gpu label",
    )
    p.add_argument("--force", action="store_true", help="rewrite .env.example and the workflow caller")


@dataclass
class Plan:
    """What init writes, keeps and skips."""

    root: Path
    force: bool
    written: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    skipped: list[dict[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    manifests: list[str] = field(default_factory=list)  # the kernel.toml files it wrote
    ignored: list[str] = field(default_factory=list)  # the patterns it added to .gitignore

    def write(self, rel: str | Path, text: str, *, ours: bool) -> None:
        """Write `rel` unless it exists (opgate's own files are rewritten with --force)."""
        path = self.root / rel
        if path.exists() and not (ours and self.force):
            self.kept.append(str(rel))
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        self.written.append(str(rel))

    def ignore(self, patterns: list[str]) -> None:
        """Append to .gitignore the patterns it lacks (opgate's outputs), under a comment saying who added them."""
        path = self.root / GITIGNORE
        text = path.read_text() if path.is_file() else ""
        have = {line.strip() for line in text.splitlines()}
        self.ignored = [p for p in patterns if p not in have]
        if not self.ignored:
            return
        if text:
            text = (text if text.endswith("\n") else text + "\n") + "\n"
        comment = "# opgate's outputs: the local review's report and ledger (added by opgate init)"
        path.write_text(text + "\n".join([comment, *self.ignored]) + "\n")


def _env() -> jinja2.Environment:
    return environment(TEMPLATES / "init")


def render(template: str, **context: Any) -> str:
    return _env().get_template(template).render(**context)


def caller(source: str, ref: str, branch: str = "main", arch_runners: dict[str, list[str]] | None = None) -> str:
    """The workflow a team commits: one job per reusable workflow, pinned to `ref`; `arch_runners`: the review
    jobs' runner labels by GPU architecture family (opgate-review.yml's `arch-runners`)."""
    return render(
        "opgate.yml.j2", source=source, ref=ref, version=__version__, branch=branch, expr=lambda e: f"${{{{ {e} }}}}",
        arch_runners=json.dumps(arch_runners, separators=(", ", ": ")) if arch_runners else "",
    )  # fmt: skip


def arch_runners(values: list[str]) -> dict[str, list[str]]:
    """`--arch-runner sm_100a=self-hosted,gpu,sm_100 ...` as arch-runners: each architecture's family (the review
    matrix's `arch`, sm_100) to its runner labels."""
    found: dict[str, list[str]] = {}
    for value in values:
        arch, _, labels = value.partition("=")
        names = [label.strip() for label in labels.split(",")]
        if not ARCH.fullmatch(arch.strip()) or not all(LABEL.fullmatch(n) for n in names):
            raise InputError(
                f"--arch-runner {value!r}: ARCH=LABEL,... with ARCH a GPU architecture (sm_90, sm_100a) and each label "
                "letters, digits, '_', '.' or '-', e.g. sm_100=self-hosted,linux,gpu,sm_100"
            )
        if family(arch.strip()) in found:
            raise InputError(f"--arch-runner {value!r}: {family(arch.strip())} is given twice")
        found[family(arch.strip())] = names
    return found


def _domain_name(text: str) -> str:
    name = re.sub(r"[^a-z0-9_]+", "_", text.lower()).strip("_")
    return name if DOMAIN_NAME.fullmatch(name) else f"k_{name}" if name else "kernels"


def _choose_domain(args: argparse.Namespace, config: RepoConfig, root: Path) -> tuple[str, str, bool]:
    """(domain, key variable, whether the configuration must declare it)."""
    if config.source == "built-in defaults":
        package = package_name(root)
        domain = args.domain or _domain_name(package[0] if package else root.name)
        if not DOMAIN_NAME.fullmatch(domain):
            raise InputError(f"--domain {domain!r}: a domain name is a-z, 0-9 and _, starting with a letter")
        key = args.key or default_key(domain)
        if not VARIABLE_NAME.fullmatch(key):
            raise InputError(f"--key {key[:3]!r}…: name the environment variable (A-Z, 0-9, _), never the key")
        return domain, key, True
    if args.domain is not None:
        if (why := config.check_domain(args.domain)) is not None:
            raise InputError(why)
        return args.domain, config.key_variable(args.domain), False
    if len(config.domains) != 1:
        have = ", ".join(sorted(config.domains)) or "none"
        raise InputError(f"{config.where()} configures {have}: give --domain NAME for the new kernels")
    domain = next(iter(config.domains))
    return domain, config.key_variable(domain), False


def _kernel_folders(root: Path, d: str) -> list[Path]:
    """The kernels under --kernels DIR: DIR itself when it holds sources, else each of its subfolders."""
    folder = root / d
    if holds_sources(folder):
        return [folder]
    return sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith("."))


def _scaffold_kernel(
    plan: Plan, folder: Path, domain: str, key: str, names: dict[str, str], *, repo_archs: bool = False
) -> None:
    rel = folder.relative_to(plan.root).as_posix()
    if (folder / MANIFEST_NAME).exists():
        plan.kept.append(repo_file(rel, MANIFEST_NAME))
        return
    proposal = propose(folder, plan.root)
    if proposal is None:
        headers = any(folder.rglob("*.cuh")) or any(folder.rglob("*.h"))
        why = "no .cu, .cpp or .cc source in it or its subfolders"
        if headers:
            why += (
                ": a header-only library is adopted through instantiation .cu files that include its headers and "
                "instantiate each kernel template (docs/adopt.md, header-only kernels)"
            )
        plan.skipped.append({"folder": rel, "why": why})
        return
    name = proposal.name
    if name in names:
        plan.skipped.append(
            {"folder": rel, "why": f"a kernel named {name} is in {names[name]}: name it in kernel.toml"}
        )
        return
    names[name] = rel
    if name != folder.name:
        plan.notes.append(f"{rel}: kernel named {name} (its kernel.toml's name; the folder keeps its own)")
    label = "the repository root" if rel == ROOT else rel
    plan.notes.extend(f"{label}: {note}" for note in proposal.notes)
    configs = sorted(p.name for p in folder.glob("*config*.json"))
    config = configs[0] if configs else "tunables.json"
    if not configs:
        plan.write(repo_file(rel, config), "{}\n", ours=False)
    builds = [(d, s) for d, s in (("cpu", proposal.cpu_sources), ("cuda", proposal.cuda_sources)) if s]
    facts = proposal.build
    architectures: list[str] | None = None
    choices: list[str] = []
    if proposal.cuda_sources and (facts.architectures or not repo_archs):
        architectures, choices = buildable(facts, machine.gpu_codes(), machine.nvcc_version())
        if left := [a for a in facts.architectures if a not in architectures]:
            plan.notes.append(
                f"{label}: {', '.join(facts.found_in)} name{'s' if len(facts.found_in) == 1 else ''} "
                f"{', '.join(left)}, which the installed nvcc cannot build: left out of [constraints] architectures "
                "(a choice, said in its kernel.toml)"
            )
        elif machine.gpu_codes() is None and facts.architectures:
            plan.notes.append(
                f"{label}: no nvcc here that lists its targets (nvcc --list-gpu-code): every architecture the build "
                "names is drafted; leave out the ones your runners' nvcc cannot build"
            )
        if not facts.architectures:
            plan.notes.append(
                f"{label}: no architecture in setup.py, CMakeLists.txt or a cpp_extension.load script: "
                "[constraints] architectures drafted as sm_90a, opgate's default; name the ones the kernel ships for"
            )
    globs = []
    if proposal.globs:  # a kernel at the repository root: its own files only
        own = [MANIFEST_NAME, config, "agent_task.json", *([] if proposal.resource_only else ["reference.py"])]
        globs = [*proposal.globs, *own]
    from_build = [d for d in proposal.include_dirs if d in facts.include_dirs]
    include_from = ", ".join(
        [*(["named in " + ", ".join(facts.read)] if from_build else []), *(
            ["#include lines"] if len(from_build) < len(proposal.include_dirs) else []
        )]
    )  # fmt: skip
    context: dict[str, Any] = {
        "name": name,
        "args": proposal.args,
        "tensors": proposal.tensors or ["x"],
        "op": proposal.op.entry if proposal.op else "",
        "scalar_types": {a: type(proposal.params[a]).__name__ for a in proposal.args},  # float | int | bool
        "entry": proposal.entry,
        "arguments": proposal.arguments,  # an entry that writes into its arguments: all of them, in order
        "outputs": proposal.outputs,
        "scratch": proposal.scratch,
    }
    plan.write(
        repo_file(rel, MANIFEST_NAME),
        render(
            "kernel.toml.j2",
            **context,
            domain=domain,
            folder=rel,
            globs=globs,
            config=config,
            builds=builds,
            params=proposal.params,
            devices=[d for d, _ in builds],
            include_dirs=proposal.include_dirs,
            include_from=include_from,
            architectures=architectures,
            arch_choices=choices,
            arch_from=", ".join(facts.found_in),
            launches=proposal.launches,
            cuda_cflags=_toml_flags(proposal.cuda_cflags),
            cflags=proposal.cflags,
            flags_from=facts.flags_from,
            flag_choices=proposal.flag_choices,
        ),
        ours=False,
    )
    plan.manifests.append(repo_file(rel, MANIFEST_NAME))
    if not proposal.resource_only:
        plan.write(repo_file(rel, "reference.py"), render("reference.py.j2", **context), ours=False)
    task = render("agent_task.json.j2", name=name, key=key, base_url=GATEWAY)
    plan.write(repo_file(rel, "agent_task.json"), task, ours=False)


def _toml_flags(flags: list[str], width: int = 100) -> list[str]:
    """The lines of a TOML array of nvcc flags, an option's tokens on one line, each line at most `width`
    characters where an option allows."""
    lines: list[str] = []
    for item in (", ".join(json.dumps(t) for t in o.tokens) for o in nvcc_options(flags)):
        if lines and len(lines[-1]) + len(item) + 2 <= width:
            lines[-1] += f" {item},"
        else:
            lines.append(f"{item},")
    return lines


def _folder(d: str) -> str:
    """A --kernels value as a folder from the repository root (`.` for the root itself)."""
    return Path(d).as_posix().strip("/") or ROOT


def _in_git(root: Path) -> bool:
    try:
        return (
            subprocess.run(
                ["git", "-C", str(root), "rev-parse", "--git-dir"], capture_output=True, timeout=30
            ).returncode
            == 0
        )
    except (OSError, subprocess.TimeoutExpired):
        return False


def run(args: argparse.Namespace) -> int:
    root = args.repo.resolve()
    if not root.is_dir():
        raise InputError(f"--repo {args.repo}: no such folder")
    if args.weekly_budget <= 0 or args.request_budget <= 0:
        raise InputError("--weekly-budget and --request-budget: positive numbers of tokens")
    if args.pin is not None and not SHA.fullmatch(args.pin):
        raise InputError(f"--pin {args.pin!r}: the 40-hex commit of opgate's tag v{__version__}")
    runners = arch_runners(args.arch_runner)
    config = load_config(root)
    if config.source != "built-in defaults":
        root = config.root
    configured = [
        g.removesuffix(suffix)
        for g in config.manifests
        for suffix in (f"/*/{MANIFEST_NAME}", f"/{MANIFEST_NAME}")
        if g.endswith(suffix) and "*" not in g[: -len(suffix)]
    ]
    dirs = args.kernels or (configured if config.source != "built-in defaults" else [])
    dirs = dirs or (["kernels"] if (root / "kernels").is_dir() else [])
    if not dirs and holds_sources(root):
        units = sorted(p.name for p in root.iterdir() if p.is_file() and p.suffix in UNIT_SUFFIXES)
        raise InputError(
            f"no kernels/ folder here, and the repository root holds kernel sources ({', '.join(units[:4])}): give "
            "--kernels . (the root is the kernel's folder; its globs name only its sources) or --kernels DIR"
        )
    if not dirs:
        raise InputError("no kernel folder here: give --kernels DIR (a folder holding one subfolder per kernel)")
    for d in dirs:
        if not (root / d).is_dir():
            raise InputError(f"--kernels {d}: no such folder under {root}")
    folders = {d: _kernel_folders(root, d) for d in dirs}
    if not any((f / MANIFEST_NAME).exists() or propose(f) is not None for fs in folders.values() for f in fs):
        raise InputError(
            f"no kernel source (.cu, .cpp, .cc) in {', '.join(dirs)} or its subfolders: give --kernels the folder "
            "holding your kernels' sources (one subfolder per kernel, or one kernel's folder)"
        )
    domain, key, declare = _choose_domain(args, config, root)
    plan = Plan(root=root, force=args.force)
    if not _in_git(root):
        plan.notes.append(
            f"{root} is not a git repository: opgate review compares two git revisions, so git init and commit "
            "before the first review"
        )
    if declare:
        domains = [{"name": domain, "key": key, "weekly": args.weekly_budget, "request": args.request_budget}]
        manifests = [
            repo_file(_folder(d), MANIFEST_NAME if folders[d] == [root / d] else f"*/{MANIFEST_NAME}") for d in dirs
        ]
        plan.write(CONFIG_FILE, render("opgate.toml.j2", manifests=manifests, domains=domains), ours=False)
    else:
        plan.kept.append(Path(config.source.split(" ")[0]).relative_to(root).as_posix())
    names: dict[str, str] = {}
    repo_archs = "architectures" in config.constraints
    for d in dirs:
        for folder in folders[d]:
            _scaffold_kernel(plan, folder, domain, key, names, repo_archs=repo_archs)
    keys = [{"name": domain, "key": key}] if declare else [
        {"name": n, "key": config.key_variable(n)} for n in config.domains
    ]  # fmt: skip
    plan.write(".env.example", render("env.example.j2", domains=keys, base_url=GATEWAY), ours=True)
    plan.write(WORKFLOW, caller(args.source, args.pin or f"v{__version__}", args.branch, runners), ours=True)
    plan.ignore(IGNORED)
    return _lint_and_report(plan, args)


def _lint_and_report(plan: Plan, args: argparse.Namespace) -> int:
    config = load_config(plan.root)
    here = Path.cwd()
    paths = [
        Path(os.path.relpath(plan.root / rel, here)) if (plan.root / rel).is_relative_to(here) else plan.root / rel
        for rel in dict.fromkeys([*plan.written, *plan.kept])
    ]
    checked = [p for p in paths if p.is_file() and lint.detect_kind(p, p.read_text(errors="replace")) is not None]
    problems, files = lint.read_sources(checked)
    findings = problems + lint.lint_files(files, lint.KeyBook.of(config))
    code = lint.exit_code(findings, ("error",))
    written = [
        "the repository root" if m == MANIFEST_NAME else m.removesuffix(f"/{MANIFEST_NAME}") for m in plan.manifests
    ]
    if written:
        first = f"write the reference.py (make_inputs, reference) and the [[cases]] of {', '.join(written)}"
    else:
        first = "every kernel folder already has its kernel.toml: nothing to write"
    next_steps = [
        f"{first}; then opgate check (seconds: validates, builds, runs the smallest case once, nothing timed)",
        "store the ledger URL as the secret OPGATE_DATABASE_URL, and each domain's gateway key as the secret "
        "OPGATE_AGENT_KEY of the environment opgate-<domain>",
        "register self-hosted runners labelled gpu and opgate-ledger, then open a pull request",
    ]
    if not args.pin:
        next_steps.append(
            f"pin the caller to the commit of v{__version__}: opgate init --force --pin "
            f"$(git ls-remote https://github.com/{args.source} refs/tags/v{__version__} | cut -f1)"
        )
    if args.json:
        out = InitOutput(
            written=plan.written,
            kept=plan.kept,
            skipped=plan.skipped,
            notes=plan.notes,
            ignored=plan.ignored,
            findings=[f.model_dump() for f in findings],
            next=next_steps,
        )
        print(out.text())
        return code
    for rel in plan.written:
        print(f"opgate: wrote {rel}")
    for rel in plan.kept:
        print(f"opgate: kept {rel} (it exists)")
    if plan.ignored:
        print(f"opgate: added to {GITIGNORE}: {' '.join(plan.ignored)}")
    for s in plan.skipped:
        print(f"opgate: skipped {s['folder']}: {s['why']}")
    for note in plan.notes:
        print(f"opgate: note: {note}")
    if findings:
        print(lint.format_text(findings))
    print(lint.format_summary(findings), file=sys.stderr)
    for step in next_steps:
        print(f"next: {step}")
    return code
