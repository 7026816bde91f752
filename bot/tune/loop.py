"""The tuning loop: propose, check, judge like a pull request, feed back, stop; then re-verify the winner."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

import requests

from bot import __version__
from bot.agent.run import gather
from bot.config.manifest import Kernel, find_manifests, load_kernel
from bot.config.settings import Settings
from bot.edges import gitio
from bot.edges.machine import cpu_name, detect
from bot.errors import InputError
from bot.ledger import Ledger
from bot.present.progress import Status
from bot.review.candidates import CandidateError
from bot.spend import budget
from bot.text.safe import one_line
from bot.tune import analysis, space
from bot.tune.agent import TUNE_LEAVES_OUT, TuneAgent, View, table
from bot.tune.model import (
    MIN_GAIN_PCT,
    WORST_CASE_PCT,
    Outcome,
    Proposal,
    RoundEvent,
    Source,
    Stop,
    Trial,
    candidate_label,
)
from bot.tune.policy import Exhaustive, Proposer, Search
from bot.tune.result import Proposed, TokenUse, TuneResult
from bot.tune.store import RunRow, TuningStore
from bot.tune.trial import review_candidate, trial_from
from bot.verdict.expectations import check_kernel

RUNS_PER_WEEK = 25  # the default --tokens: a domain's weekly budget / 25 (its users' per-task total)
Strategy = Literal["agent", "exhaustive", "both"]


@dataclass(frozen=True)
class TuneRequest:
    repo: Path
    kernel: str
    base: str = "HEAD"
    strategy: Strategy = "agent"
    rounds: int = 6
    tokens: int | None = None
    out: Path = Path("reports/tune")


def default_tokens(settings: Settings, domain: str) -> int:
    return settings.budget_weekly.get(domain) // RUNS_PER_WEEK


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.=-]+", "_", text)[:60].strip("_") or "candidate"


class _AgentProposer:
    """TuneAgent as a Proposer: the prompt's table from this run's rounds."""

    source: Source = "agent"

    def __init__(self, agent: TuneAgent, rounds: int, plateau_rounds: int, run_id: str) -> None:
        self.agent, self.run_id = agent, run_id
        self.max_rounds: int | None = rounds
        self.plateau_rounds: int | None = plateau_rounds

    def propose(self, search: Search) -> Proposal:
        rows, notes = table([e for e in search.events if e.source != "verify"], search.trials)
        seen = len(search.seen & {space.config_key(c) for c in search.space})
        view = View(
            round=search.round, max_rounds=search.max_rounds, tokens_left=search.tokens_left, seen=seen,
            space_size=len(search.space), rows=rows, notes=notes,
        )  # fmt: skip
        return self.agent.propose(view, f"{self.run_id}-r{search.round}")


class Tuner:
    """One `opgate tune` run over one kernel. `proposer` replaces the agent (benchmarks' offline policy)."""

    def __init__(
        self,
        request: TuneRequest,
        settings: Settings,
        ledger: Ledger,
        *,
        session: requests.Session | None = None,
        proposer: Proposer | None = None,
        status: Status | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.request, self.settings, self.ledger = request, settings, ledger
        self.session, self.sleep = session, sleep
        self.custom = proposer
        self.status = status or Status()
        self.store = TuningStore(ledger)
        self.env = detect()
        self.device_name = self.env.gpu if self.env.device == "cuda" and self.env.gpu else cpu_name()

    # -- setup ------------------------------------------------------------------------------------

    def _load(self, repo: Path, base_sha: str) -> tuple[Kernel, str]:
        config = self.settings.repo_config
        with gitio.worktree(repo, base_sha) as tree:
            found = find_manifests(tree, config.manifests)
            if self.request.kernel not in found:
                have = ", ".join(sorted(found)) or "none"
                raise InputError(f"no kernel {self.request.kernel!r} on {base_sha[:10]} (have: {have})")
            path = found[self.request.kernel]
            kernel = load_kernel(tree / path, config=config, path=path)
            text = (tree / path / kernel.manifest.config).read_text()
            if not kernel.manifest.tunables:
                raise InputError(f"{kernel.name}: kernel.toml has no [tunables]: there is nothing to tune")
            # the review's materials (base's limits, cases and probes, its figures in main's history), read while
            # base's tree is here; the agent's prompt carries them within the domain's per-request budget
            pieces, missing = gather(
                kernel, kernel, [], self.settings, self.ledger, None, base_sha, leave_out=TUNE_LEAVES_OUT
            )
            self.materials = pieces, [line for line, _ in missing]
        return kernel, text

    def run(self) -> TuneResult:
        req = self.request
        if req.rounds < 1:
            raise InputError("--rounds must be at least 1")
        if req.tokens is not None and req.tokens < 1:
            raise InputError("--tokens must be a positive number of tokens")
        self.repo = gitio.toplevel(req.repo)
        self.base_sha = gitio.resolve(self.repo, req.base)
        self.kernel, self.config_text = self._load(self.repo, self.base_sha)
        self.space = space.configs(self.kernel.manifest.tunables)
        # Shapes the search never sees: the re-verification runs them (with every other case, on fresh inputs).
        self.held_out = frozenset(c.name for c in self.kernel.manifest.cases if c.holdout)
        if req.strategy != "agent" and len(self.space) > self.settings.tune_max_space:
            raise InputError(
                f"{self.kernel.name} has {len(self.space)} allowed configs, over OPGATE_TUNE_MAX_SPACE="
                f"{self.settings.tune_max_space}: use --strategy agent, or raise the limit"
            )
        domain = self.kernel.manifest.domain
        if self.custom is None and req.strategy != "exhaustive":
            self._check_agent()
        self.token_limit = req.tokens or default_tokens(self.settings, domain)
        self.strategy: Strategy | Literal["policy"] = "policy" if self.custom is not None else req.strategy
        self.row, resumed = self.store.open_run(
            kernel=self.kernel.name, domain=domain, base_sha=self.base_sha, device_name=self.device_name,
            strategy=self.strategy, max_rounds=req.rounds, token_limit=self.token_limit,
        )  # fmt: skip
        self.run_id = self.row.run_id
        self.base_trial = Trial(
            key=space.config_key(self.kernel.config), config=dict(self.kernel.config), source="base",
            status="judged", verdict="pass", run_id=self.run_id,
        )  # fmt: skip
        self.events = self.store.events(self.run_id)
        self.trials: dict[str, Trial] = {self.base_trial.key: self.base_trial}
        for e in self.events:
            if e.key and e.key not in self.trials and e.source != "verify":
                found = self.store.trial(self.kernel.name, self.base_sha, self.device_name, e.key)
                if found is not None:
                    self.trials[e.key] = found
        self.started = time.perf_counter() - (self.events[-1].elapsed_s if self.events else 0.0)
        if resumed:
            self.status.line(
                one_line(
                    f"tune {self.kernel.name}: resuming run {self.run_id} ({len(self.events)} round event(s), "
                    f"{self.store.tokens(self.run_id).total_tokens:,} tokens so far)"
                )
            )
        stop, sweep = self._phases()
        return self._finish(stop, sweep, resumed)

    def _check_agent(self) -> None:
        """Before a run is opened: the agent can be asked (a task file, its key set)."""
        task = self.kernel.task
        if task is None:
            raise InputError(f"{self.kernel.name} has no agent task file: use --strategy exhaustive")
        if self.settings.agent_key_for(task.provider.api_key_env) is None:
            raise InputError(
                f"{task.provider.api_key_env} is not set: the agent cannot be asked "
                "(--strategy exhaustive needs no key)"
            )

    def _phases(self) -> tuple[Stop, Stop | None]:
        strategy = self.request.strategy
        if self.custom is not None:
            return self._search(self.custom), None
        stop: Stop | None = self.store.stop_of(self.store.run(self.run_id)) if strategy == "both" else None
        if strategy in ("agent", "both") and stop is None:
            agent = TuneAgent(
                self.kernel, settings=self.settings, ledger=self.ledger, run_id=self.run_id, base_sha=self.base_sha,
                config_text=self.config_text, example=self._example(), token_limit=self.token_limit,
                spent=lambda: self.store.tokens(self.run_id).total_tokens,
                candidates_dir=self.request.out / "agent_candidates", materials=self.materials, session=self.session,
                sleep=self.sleep,
            )  # fmt: skip
            proposer = _AgentProposer(agent, self.request.rounds, self.settings.tune_plateau_rounds, self.run_id)
            stop = self._search(proposer)
            self.store.set_stop(self.run_id, stop)
        if strategy == "agent":
            assert stop is not None
            return stop, None
        sweep = self._search(Exhaustive())
        return (stop, sweep) if stop is not None else (sweep, None)

    def _example(self) -> tuple[str, str]:
        """An example patch for the prompt: the current config with its first tunable at another value."""
        name, values = next(iter(self.kernel.manifest.tunables.items()))
        other = next((v for v in values if v != self.kernel.config.get(name)), values[0])
        config = {**self.kernel.config, name: other}
        return space.config_patch(self.kernel, self.config_text, config), f"{name}={other}"

    # -- the loop -------------------------------------------------------------------------------

    def _rounds(self, source: Source) -> int:
        return max((e.round for e in self.events if e.source == source), default=0)

    def _seen(self) -> set[str]:
        return {self.base_trial.key} | {e.key for e in self.events if e.key and e.source != "verify"}

    def _tokens_left(self) -> int:
        return max(0, self.token_limit - self.store.tokens(self.run_id).total_tokens)

    def _search(self, proposer: Proposer) -> Stop:
        space_keys = {space.config_key(c) for c in self.space}
        while True:
            done = self._rounds(proposer.source)
            mine = [e for e in self.events if e.source == proposer.source]
            stop = analysis.next_stop(
                rounds_done=done,
                max_rounds=proposer.max_rounds,
                best_by_round=analysis.history(mine, self.trials),
                plateau_rounds=proposer.plateau_rounds,
                seen=len(self._seen() & space_keys),
                space_size=len(self.space),
            )
            if stop is not None:
                return stop
            search = Search(
                kernel=self.kernel, config_text=self.config_text, space=self.space, round=done + 1,
                max_rounds=proposer.max_rounds, tokens_left=self._tokens_left(), events=list(self.events),
                trials=dict(self.trials), seen=self._seen(),
            )  # fmt: skip
            proposal = proposer.propose(search)
            if proposal.outcome == "done":
                return Stop(kind="converged" if proposer.source == "policy" else "space", detail=proposal.detail)
            if proposal.outcome == "over_budget":
                self._event(done + 1, proposer.source, "over_budget", detail=proposal.detail, tokens=proposal.tokens)
                return analysis.budget_stop(proposal.detail, (0, 0), analysis.pass_rate(self._run_trials()))
            if proposal.outcome in ("malformed", "no_candidate") or proposal.patch is None:
                outcome: Outcome = "malformed" if proposal.outcome == "malformed" else "no_candidate"
                self._event(done + 1, proposer.source, outcome, detail=proposal.detail, tokens=proposal.tokens)
                continue
            self._candidate(done + 1, proposer.source, proposal)

    def _candidate(self, rnd: int, source: Source, proposal: Proposal) -> None:
        assert proposal.patch is not None
        try:
            seen = space.inspect(self.repo, self.base_sha, proposal.patch, self.kernel)
        except CandidateError as exc:
            self._event(rnd, source, "invalid", detail=f"not applied: {exc}", tokens=proposal.tokens)
            return
        if seen.key in self._seen() and not seen.is_base:
            self._event(rnd, source, "repeat", key=seen.key, tokens=proposal.tokens, detail="answered from the table")
            return
        if seen.is_base:
            self._event(rnd, source, "base", key=seen.key, tokens=proposal.tokens, detail="the current config")
            return
        stored = self.store.trial(self.kernel.name, self.base_sha, self.device_name, seen.key)
        if stored is not None:
            self.trials[seen.key] = stored
            self._event(
                rnd, source, "reused", key=seen.key, tokens=proposal.tokens, detail=f"judged by {stored.run_id}"
            )
            return
        seq = len(self.events) + 1
        self.status.line(one_line(f"tune {self.kernel.name}: round {rnd} ({source}): judging {_label(seen)}"))
        k, seconds = review_candidate(
            self.repo, self.base_sha, seen.patch, self.kernel.name, settings=self.settings, ledger=self.ledger,
            out=self.request.out / "trials" / f"{seq:03d}-{_slug(_label(seen))}", held_out=self.held_out, search=True,
            agent_cases=proposal.test_matrix, agent_name=proposal.proposer,
        )  # fmt: skip
        trial = trial_from(
            k, key=seen.key, config=seen.config, source=source, patch=seen.patch, run_id=self.run_id, seconds=seconds
        )
        if proposal.expected_metrics:  # the agent's expectations held against this trial, as a review holds them
            trial.expectations = check_kernel(k, proposal.expected_metrics)
        self._event(rnd, source, "judged", key=seen.key, tokens=proposal.tokens, trial=trial)

    def _event(
        self, rnd: int, source: Source, outcome: Outcome, *, key: str = "", tokens: int = 0, detail: str = "",
        trial: Trial | None = None,
    ) -> None:  # fmt: skip
        event = RoundEvent(
            seq=len(self.events) + 1, round=rnd, source=source, outcome=outcome, key=key, tokens=tokens,
            elapsed_s=round(time.perf_counter() - self.started, 2), detail=detail,
        )  # fmt: skip
        stored = self.store.record(
            self.run_id, event, trial, kernel=self.kernel.name, base_sha=self.base_sha, device_name=self.device_name,
            domain=self.kernel.manifest.domain,
        )  # fmt: skip
        if stored is not None:
            self.trials[stored.key] = stored
        self.events.append(event)
        self._progress(event)

    def _progress(self, e: RoundEvent) -> None:
        t = self.trials.get(e.key)
        what = (
            e.outcome
            if t is None
            else f"{e.outcome} {t.label}"
            + (f" x{t.speedup:.3f} ({t.verdict})" if t.speedup is not None and t.source != "base" else "")
        )
        b = analysis.best(self._run_trials())
        best = f"x{b.speedup:.3f} ({b.label})" if b is not None and b.speedup else "x1.000 (the current config)"
        faster, timed = analysis.pass_rate(self._run_trials())
        limit = f"/{self.request.rounds}" if e.source == "agent" else ""
        left = f"; tokens left {self._tokens_left():,}" if e.source == "agent" else ""
        self.status.line(
            one_line(
                f"tune {self.kernel.name}: round {e.round}{limit} ({e.source}) {what}; best {best}{left}; "
                f"pass rate {faster}/{timed}"
            )
        )

    def _run_trials(self) -> list[Trial]:
        """This run's candidates (the base excluded), in the order first proposed."""
        keys = list(dict.fromkeys(e.key for e in self.events if e.key and e.source != "verify"))
        return [self.trials[k] for k in keys if k in self.trials and self.trials[k].source != "base"]

    # -- the end -----------------------------------------------------------------------------

    def _verify(self, winner: Trial) -> Trial:
        """The winner once more, in fresh processes with a new secret seed (a new Reviewer) and with the held-out
        cases the search never ran, before it is proposed."""
        found = self.store.trial(self.kernel.name, self.base_sha, self.device_name, winner.key, verify_of=self.run_id)
        if found is not None:
            return found
        self.status.line(one_line(f"tune {self.kernel.name}: re-verifying {winner.label} (fresh processes, new seed)"))
        k, seconds = review_candidate(
            self.repo, self.base_sha, winner.patch, self.kernel.name, settings=self.settings, ledger=self.ledger,
            out=self.request.out / "verify",
        )  # fmt: skip
        trial = trial_from(
            k, key=winner.key, config=winner.config, source="verify", patch=winner.patch, run_id=self.run_id,
            seconds=seconds, verify_of=self.run_id,
        )  # fmt: skip
        event = RoundEvent(
            seq=len(self.events) + 1, round=0, source="verify", outcome="judged", key=winner.key,
            elapsed_s=round(time.perf_counter() - self.started, 2), detail="re-verified: fresh processes, new seed",
        )  # fmt: skip
        stored = self.store.record(
            self.run_id, event, trial, kernel=self.kernel.name, base_sha=self.base_sha, device_name=self.device_name
        )
        self.events.append(event)
        return stored or trial

    def _finish(self, stop: Stop, sweep: Stop | None, resumed: bool) -> TuneResult:
        run_trials = self._run_trials()
        winner = analysis.best(run_trials)
        verified, proposed, why = None, None, ""
        if analysis.proposable(winner):
            assert winner is not None
            verified = self._verify(winner)
            if analysis.proposable(verified, measured=True):
                proposed = Proposed(
                    key=winner.key, label=winner.label, config=winner.config, patch=winner.patch,
                    speedup=winner.speedup or 1.0, verified_speedup=verified.speedup or 1.0,
                    branch=f"opgate/tune-{self.kernel.name}-{self.run_id.rsplit('-', 1)[-1]}",
                    flags=list(dict.fromkeys([*winner.implausible, *verified.implausible])),
                )  # fmt: skip
            else:
                got = f"x{verified.speedup:.3f}" if verified.speedup is not None else "no timing"
                why = (
                    f"the winner {winner.label} (x{winner.speedup:.3f} in the search) did not hold when re-verified "
                    f"({got}, verdict {verified.verdict}; a proposal needs x{1 + MIN_GAIN_PCT / 100:.2f} with every "
                    f"gate passed and at least one case faster beyond noise): not proposed"
                )
        else:
            why = (
                f"no candidate beat base by ≥ {MIN_GAIN_PCT:g}% with every gate passed and no case more than "
                f"{WORST_CASE_PCT:g}% slower"
            )
        self.store.finish(self.run_id, stop, winner)
        agent_order = [
            self.trials[k]
            for k in dict.fromkeys(e.key for e in self.events if e.source == "agent" and e.key)
            if k in self.trials
        ]
        comparison = analysis.compare(agent_order, run_trials) if self.request.strategy == "both" else None
        spend = self.store.tokens(self.run_id)
        domain = self.kernel.manifest.domain
        week = budget.state(self.ledger, domain=domain, limit=self.settings.budget_weekly.get(domain))
        return TuneResult(
            run_id=self.run_id, kernel=self.kernel.name, domain=domain, base_sha=self.base_sha,
            device_name=self.device_name, strategy=self.strategy, resumed=resumed,
            config_path=space.config_path(self.kernel), base_config=dict(self.kernel.config),
            max_rounds=self.request.rounds, rounds=self._rounds("agent") or self._rounds("policy"),
            space_size=len(self.space), seen=len(self._seen() & {space.config_key(c) for c in self.space}),
            stop=stop, sweep_stop=sweep, events=self.events, trials=run_trials, best=winner, verified=verified,
            proposal=proposed, not_proposed=why, pass_rate=analysis.pass_rate(run_trials),
            per_shape=analysis.per_shape(run_trials, self.base_trial.label, winner.key if winner else None),
            held_out=sorted(self.held_out),
            comparison=comparison,
            tokens=TokenUse(**spend.model_dump(), limit=self.token_limit, weekly_left=max(0, week.left)),
            environment=self.env, created_at=datetime.now(UTC).isoformat(timespec="seconds"),
            opgate_version=__version__,
        )  # fmt: skip


def _label(seen: space.Inspected) -> str:
    return candidate_label(seen.key, seen.config)


__all__ = ["RunRow", "TuneRequest", "Tuner", "default_tokens"]
