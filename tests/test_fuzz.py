"""Property-based fuzzing of every parser and renderer that reads untrusted input: no uncaught exception,
every output log-safe and comment-safe. Bounded: the whole file runs in well under a minute on 2 cores."""

from __future__ import annotations

import ctypes
import json
import os
import re
import tempfile

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bot.agent.review import AgentOutputError, PatchError, parse_review, validate_patch
from bot.edges.events import parse_issue_comment_event, parse_pull_request_event
from bot.errors import InputError
from bot.models.agent_report import AgentReport
from bot.models.report import Report
from bot.present.render import render_comment
from bot.review.changes import parse_diff, touching
from bot.review.coverage import coverage
from bot.text.safe import code, fence, log_safe, one_line, untrusted
from bot.untrusted.resources import parse_ptx_threads, parse_ptxas
from bot.untrusted.runner import protocol
from bot.untrusted.runner.freeze import read_outputs
from tests.hostile import hostile_model, problems, table_breaks

# CI replays the same examples every run (a failure there is a bug, never luck); locally each run explores.
# OPGATE_FUZZ_EXAMPLES=5000 explores longer (the renderer, the slowest, gets a quarter of it).
EXAMPLES = int(os.environ.get("OPGATE_FUZZ_EXAMPLES", "200"))
settings.register_profile("opgate", max_examples=EXAMPLES, deadline=None, database=None, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow])  # fmt: skip
settings.register_profile("opgate-ci", parent=settings.get_profile("opgate"), derandomize=True)
settings.load_profile("opgate-ci" if os.environ.get("CI") else "opgate")

# Pieces of text that mean something to a log, to Markdown, to GitHub, to git or to a parser.
TOKENS = [
    "::", "##[", "::error title=x::y", "\r", "\n", "\r\n", "\t", "\x00", "\x1b[2K", "\u202e", "\u2028", "\x85",
    "`", "```", "~~~", "|", "\\", "\\|", "<", ">", "<img src=x>", "</details>", "&", "&lt;", "[", "]", "](", "![",
    "https://", "HTTPS://", "Https://", "ftp://", "www.", "WWW.", "mailto:", "@", "@team", "o/r#1", "#", "> ",
    "- ", "1. ", "---", "***", "evil.example", "kernels/deepgemm_tile/", "a/", "b/", "/dev/null", "..", '"',
    "\ud800", "\udcff", "\ufffd", "0" * 30, "9" * 5000,
]  # fmt: skip
hostile_text = st.lists(st.one_of(st.sampled_from(TOKENS), st.text(max_size=8)), max_size=20).map("".join)
any_text = st.one_of(hostile_text, st.text(alphabet=st.characters(exclude_categories=()), max_size=60))


def assert_log_safe(line: str) -> None:
    for part in re.split(r"\r\n|\r|\n|\x85|\u2028|\u2029", line):
        assert not part.lstrip().startswith(("::", "##[")), line
    line.encode("utf-8")  # writable to a log at all


def assert_comment_safe(markdown: str) -> None:
    assert problems(markdown) == [], markdown
    markdown.encode("utf-8")


# -- the safe functions themselves ------------------------------------------------------------------------


@given(any_text)
def test_log_safe_text_can_start_no_workflow_command(text: str):
    assert_log_safe(log_safe(text))
    single = one_line(text)
    assert "\n" not in single and "\r" not in single
    assert_log_safe(single)


@given(any_text)
def test_comment_safe_text_is_inert_in_a_list_item_a_table_cell_a_code_span_and_a_fence(text: str):
    assert_comment_safe(f"- {untrusted(text)}\n")
    assert_comment_safe(f"| a | b |\n|---|---|\n| {untrusted(text)} | `{code(text)}` |\n")
    assert_comment_safe(f"```text\n{fence(text)}\n```\n\nafter `{code(text)}`\n")


# -- the event parser ---------------------------------------------------------------------------------------

json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), any_text),
    lambda children: st.one_of(st.lists(children, max_size=4), st.dictionaries(any_text, children, max_size=4)),
    max_leaves=20,
)
event_like = st.fixed_dictionaries(
    {
        "action": json_values,
        "number": json_values,
        "pull_request": json_values,
        "issue": json_values,
        "comment": json_values,
        "sender": json_values,
    },
)
event_bytes = st.one_of(
    st.binary(max_size=200),
    json_values.map(lambda v: json.dumps(v).encode()),
    event_like.map(lambda v: json.dumps(v).encode()),
    st.integers(1, 5000).map(lambda n: b"[" * n + b"]" * n),
)


@given(event_bytes)
def test_an_event_is_a_model_or_one_line_of_bad_input(raw: bytes):
    for parse in (parse_pull_request_event, parse_issue_comment_event):
        try:
            event = parse(raw, "event.json")
        except InputError as exc:
            assert_log_safe(one_line(exc))
        else:
            json.dumps(event.model_dump()).encode("utf-8")  # every string in it is writable


# -- the diff-to-kernel mapper ------------------------------------------------------------------------------

paths = st.lists(st.sampled_from(["kernels", "deepgemm_tile", "a b", "caf\\303\\251", "x\\n", "..", "-", "\"q\""]),
                 min_size=1, max_size=4).map("/".join)  # fmt: skip


@st.composite
def diffs(draw) -> str:
    """Text shaped like `git diff` output, with hostile names, headers and hunks."""
    out = []
    for _ in range(draw(st.integers(0, 3))):
        old, new = draw(paths), draw(paths)
        quote = draw(st.booleans())
        a, b = (f'"a/{old}"', f'"b/{new}"') if quote else (f"a/{old}", f"b/{new}")
        out.append(f"diff --git {a} {b}\n")
        out.extend(draw(st.lists(st.sampled_from([
            "new file mode 100644\n", "deleted file mode 100755\n", "new file mode 120000\n", "old mode 100644\n",
            "new mode 100755\n", "similarity index 90%\n", f"rename from {old}\n", f"rename to {new}\n",
            "index 1111111..2222222 100644\n", f"Binary files {a} and {b} differ\n", "GIT binary patch\n",
        ]), max_size=3)))  # fmt: skip
        if draw(st.booleans()):
            out.append(f"--- {a}\n+++ {b}\n")
            n = draw(st.integers(0, 3))
            out.append(f"@@ -1,{n} +1,{n} @@\n" + "".join(f" {draw(hostile_text)}\n" for _ in range(n)))
        out.append(draw(st.sampled_from(["", "\\ No newline at end of file\n", draw(hostile_text) + "\n"])))
    return "".join(out)


@given(st.one_of(diffs(), any_text))
def test_a_diff_maps_to_kernels_or_is_one_line_of_bad_input(text: str):
    try:
        changes = parse_diff(text)
    except InputError as exc:
        assert_log_safe(one_line(exc))
        return
    touched = touching(changes, ["kernels/deepgemm_tile/**"])
    cov = coverage(changes, ["kernels/deepgemm_tile/**"], {c.path: 2**21 for c in changes})
    assert cov.unmatched.total == len(dict.fromkeys(c.path for c in changes if c not in touched))
    for change in changes:
        assert_log_safe(one_line(change.path))
        assert_comment_safe(f"- `{code(change.path)}` {untrusted(change.path)}\n")


# -- the ptxas output parser --------------------------------------------------------------------------------

ptxas_lines = st.lists(
    st.one_of(
        st.builds(
            "ptxas info    : Compiling entry function '{}' for '{}'".format,
            hostile_text,
            st.sampled_from(["sm_90a", "sm_80", ""]),
        ),
        st.builds("ptxas info    : Function properties for {}".format, hostile_text),
        st.builds(
            "    {} bytes stack frame, {} bytes spill stores, {} bytes spill loads".format,
            *[st.sampled_from(["0", "8", "99999999999", "9" * 5000, "٣"])] * 3,
        ),
        st.builds(
            "ptxas info    : Used {} registers, {} bytes smem, {} bytes cmem[0]".format,
            *[st.sampled_from(["0", "255", "9" * 5000, "-1"])] * 3,
        ),
        hostile_text,
    ),
    max_size=12,
).map("\n".join)


@given(ptxas_lines, st.sampled_from([None, "sm_90a"]))
def test_ptxas_output_parses_into_resources_without_exception(text: str, arch: str | None):
    for res in parse_ptxas(text, arch):
        assert res.registers >= 0 and res.spill_bytes >= 0 and res.smem_bytes >= 0
        assert_comment_safe(f"| f |\n|---|\n| `{code(res.function)}` |\n")


@given(st.lists(st.one_of(st.sampled_from([".entry k(", ".entry ", ".maxntid 128, 2", ".reqntid ", "9" * 5000,
                                           ",", " ", "{", "\n"]), hostile_text), max_size=15).map("".join))  # fmt: skip
def test_ptx_launch_bounds_parse_without_exception(ptx: str):
    for name, threads in parse_ptx_threads(ptx).items():
        assert isinstance(name, str) and threads >= 0


# -- the agent reply parser and the patch validator ---------------------------------------------------------

replies = st.one_of(
    any_text,
    st.fixed_dictionaries(
        {},
        optional={
            "candidate_patch": st.one_of(st.none(), diffs(), any_text),
            "risk_notes": st.one_of(st.lists(any_text, max_size=3), json_values),
            "local_commands": st.one_of(st.lists(any_text, max_size=3), json_values),
            "expected_metrics": st.one_of(
                st.dictionaries(any_text, st.one_of(st.floats(), any_text), max_size=3), json_values
            ),
        },
    ).map(json.dumps),
)


@given(replies, st.booleans())
def test_an_agent_reply_is_a_review_or_an_output_error(reply: str, fenced: bool):
    text = f"```json\n{reply}\n```" if fenced else reply
    try:
        review = parse_review(text, "deepgemm_tile")
    except AgentOutputError as exc:
        assert_log_safe(one_line(exc))
        return
    agent = AgentReport(status="ok", domain="deepgemm", risk_notes=review.risk_notes,
                        local_commands=review.local_commands, candidate_patch=review.candidate_patch)  # fmt: skip
    report = hostile_model(Report, "x").model_copy(update={"agents": [agent], "agent": agent})
    assert_comment_safe(render_comment(report))


@given(diffs())
def test_a_patch_is_refused_or_stays_inside_the_kernel_folder(patch: str):
    try:
        text = validate_patch(patch, "deepgemm_tile")
    except PatchError as exc:
        assert_log_safe(one_line(exc))
        return
    for line in text.splitlines():
        if line.startswith(("diff --git", "rename ", "copy ", "--- ", "+++ ")):
            names = [n for n in line.split(" ")[2:] if n != "/dev/null"] if line.startswith("diff") else [
                line.split(" ", 2)[-1] if not line.startswith(("---", "+++")) else line[4:]]  # fmt: skip
            for name in names:
                if name != "/dev/null":
                    assert name.removeprefix("a/").removeprefix("b/").startswith("kernels/deepgemm_tile/"), line
        assert not re.match(r"(new file mode|new mode) (120000|160000|100755)", line), line


# -- the judge's readers of what a worker sends (frames, tensor headers, tensor files, its memory) ------------

nests = st.integers(0, 3000).map(lambda n: "[" * n + "]" * n) | st.integers(0, 3000).map(
    lambda n: '{"event": ' + '{"a": ' * n + "1" + "}" * n + "}"
)
frames = st.one_of(st.binary(max_size=512), json_values.map(json.dumps), nests).map(
    lambda f: f if isinstance(f, bytes) else f.encode("utf-8", "surrogatepass")
)


@given(frames)
def test_a_worker_frame_is_a_message_or_a_protocol_error(payload: bytes):
    try:
        message = protocol.decode(payload)
    except protocol.ProtocolError as exc:
        assert_log_safe(one_line(exc))
        return
    assert isinstance(message, dict)


dims = st.one_of(st.integers(-3, 40), st.integers(0, 2**80), st.booleans(), st.floats(), st.none(), any_text)
field = st.one_of(st.integers(-(2**70), 2**70), st.integers(0, 64), st.booleans(), st.none(), any_text)
tensor_entry = st.fixed_dictionaries(
    {},
    optional={
        "dtype": st.one_of(st.sampled_from([*protocol.ITEMSIZE, "complex64", "float8_e4m3fn", "object"]), any_text),
        "shape": st.one_of(st.lists(dims, max_size=10), dims),
        "offset": field,
        "address": field,
        "nbytes": field,
        "device": st.sampled_from(["cpu", "cuda", "meta", ""]),
    },
)
headers = st.one_of(st.lists(tensor_entry, max_size=5), json_values)


def _consistent(tensors: list, total: int) -> None:
    assert sum(t.numel() * t.element_size() for t in tensors) == total
    assert all(t.dim() <= protocol.MAX_DIMS and t.device.type == "cpu" for t in tensors)


@given(headers, st.binary(max_size=256))
def test_a_tensor_header_and_its_file_are_tensors_or_a_protocol_error(header, blob: bytes):
    with tempfile.NamedTemporaryFile() as f:
        f.write(blob)
        f.flush()
        try:
            tensors = protocol.read_tensors(f.name, header, max_bytes=1024, device="cpu")
        except protocol.ProtocolError as exc:
            assert_log_safe(one_line(exc))
            return
    _consistent(tensors, len(blob))


_MEMORY = ctypes.create_string_buffer(bytes(range(256)) * 4)  # mapped memory of this process, to aim at
addresses = st.one_of(field, st.integers(0, 1024).map(lambda i: ctypes.addressof(_MEMORY) + i))


@given(st.lists(tensor_entry, max_size=4), st.lists(addresses, min_size=4, max_size=4))
def test_outputs_read_from_a_workers_memory_are_tensors_or_a_protocol_error(header, where):
    for entry, address in zip(header, where, strict=False):
        entry["address"] = address
    try:
        tensors = read_outputs(os.getpid(), header, max_bytes=4096)
    except protocol.ProtocolError as exc:
        assert_log_safe(one_line(exc))
        return
    _consistent(tensors, sum(e["nbytes"] for e in header))


# -- the renderer -------------------------------------------------------------------------------------------


@settings(max_examples=max(10, EXAMPLES // 4))
@given(hostile_text, st.integers(0, 1))
def test_a_report_full_of_hostile_text_renders_inert(text: str, variant: int):
    comment = render_comment(hostile_model(Report, text or "x", variant), unseen_files=[text])
    assert_comment_safe(comment)
    assert table_breaks(comment) == []
