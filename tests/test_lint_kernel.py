"""`opgate lint` on kernel manifests: each [[cases]] at its own line, "did you mean" for an unknown key, and what a
review would stop on (a missing tunables file, a misspelt entry, a case without the entry's scalar) named first."""

from __future__ import annotations

import shutil
from pathlib import Path

from bot.lint import KeyBook, LintFinding
from bot.lint.kernel import check_manifest

TUTORIAL = Path(__file__).resolve().parent / "fixtures" / "torch_library_repo" / "ops" / "csrc"
BOOK = KeyBook({"moe": "TAOTOKEN_API_KEY_MOE_AGENT"})

MANIFEST = """name = "extension_cpp"
domain = "moe"
globs = ["ops/csrc/**"]
config = "tunables.json"

[build.cpu]
sources = ["muladd.cpp"]
entry = "torch.ops.extension_cpp.mymuladd"
args = ["c"]

[[cases]]
name = "small"
dtype = "float32"
shape = { n = 1024 }
params = { c = 1.5 }

[[cases]]
name = "large"
dtype = "float32"
shape = { n = 1048576 }
params = { c = 1.5 }

[[cases]]
name = "ragged"
dtype = "float32"
shape = { n = 1000 }
params = { c = 1.5 }
"""


def kernel(tmp_path: Path, text: str, *, tunables: bool = True) -> Path:
    folder = tmp_path / "ops" / "csrc"
    shutil.copytree(TUTORIAL, folder)
    (folder / "kernel.toml").write_text(text)
    (folder / "reference.py").write_text("def make_inputs(case, device, seed): ...\ndef reference(a, b, c): ...\n")
    if tunables:
        (folder / "tunables.json").write_text("{}\n")
    return folder / "kernel.toml"


def lint(path: Path) -> list[LintFinding]:
    return check_manifest(str(path), path.read_text(), BOOK)[0]


def test_a_clean_torch_library_manifest_lints_clean(tmp_path):
    assert lint(kernel(tmp_path, MANIFEST)) == []


def test_each_case_is_reported_at_its_own_line_with_did_you_mean(tmp_path):
    text = MANIFEST.replace('name = "large"\n', 'name = "large"\ntolerence = 1e-3\n')
    text = text.replace('name = "ragged"\ndtype = "float32"', 'name = "ragged"\ndtype = "float23"')
    found = lint(kernel(tmp_path, text))
    lines = text.splitlines()
    expected = [lines.index("tolerence = 1e-3") + 1, lines.index('dtype = "float23"') + 1]
    assert [(f.line, f.rule) for f in found] == [(expected[0], "KERN001"), (expected[1], "KERN001")]
    assert found[0].message == "cases[1].tolerence: Extra inputs are not permitted (did you mean 'tolerance'?)"
    assert found[1].message.startswith("cases[2].dtype: Input should be")


def test_a_case_without_the_entrys_scalar_is_named_at_that_case(tmp_path):
    text = MANIFEST.replace("shape = { n = 1000 }\nparams = { c = 1.5 }", 'shape = { n = 1000 }\nparams = { c = "x" }')
    found = lint(kernel(tmp_path, text))
    assert [(f.line, f.message) for f in found] == [
        (
            text.splitlines().index('params = { c = "x" }') + 1,
            "cases[2] (ragged): params.c = 'x': the entry takes an int, float or bool",
        )
    ]


def test_what_a_review_would_stop_on_is_named_by_lint(tmp_path):
    # tunables declared, so their file is needed (without any, a missing config file is fine: nothing to read)
    text = MANIFEST.replace("torch.ops.extension_cpp.mymuladd", "torch.ops.extension_cpp.mymuladdd")
    text = text.replace("\n[build.cpu]", "\n[tunables]\nblock = [64, 128]\n\n[build.cpu]", 1)
    found = lint(kernel(tmp_path, text, tunables=False))
    assert [(f.line, f.rule, f.message) for f in found] == [
        (4, "KERN006", "config 'tunables.json': no such file beside kernel.toml"),
        (
            11,
            "KERN006",
            "[build.cpu] entry = 'torch.ops.extension_cpp.mymuladdd': no such op or function in its sources; "
            "did you mean 'torch.ops.extension_cpp.mymuladd'?",
        ),
    ]


def test_a_torch_library_op_called_by_a_plain_name_is_pointed_at_torch_ops(tmp_path):
    found = lint(kernel(tmp_path, MANIFEST.replace('entry = "torch.ops.extension_cpp.mymuladd"', 'entry = "mymuladd"')))
    assert [f.message for f in found] == [
        "[build.cpu] entry = 'mymuladd': the sources register TORCH_LIBRARY ops, not a Python module; call one as "
        "entry = 'torch.ops.extension_cpp.mymuladd' (offered: torch.ops.extension_cpp.mymuladd)"
    ]


def test_an_architecture_without_an_occupancy_table_is_named_not_accepted_silently(tmp_path):
    text = MANIFEST.replace("\n[build.cpu]", '\n[constraints]\narchitectures = ["sm_86", "sm_110a"]\n\n[build.cpu]', 1)
    found = lint(kernel(tmp_path, text))
    assert [(f.line, f.rule, f.severity, f.message) for f in found] == [
        (
            text.splitlines().index('architectures = ["sm_86", "sm_110a"]') + 1,
            "KERN007",
            "warning",
            "occupancy not computed for sm_110a: no table "
            "(opgate has sm_75, sm_80, sm_86, sm_87, sm_89, sm_90, sm_100, sm_103, sm_120)",
        )
    ]
    shipped = '"sm_75", "sm_80", "sm_86", "sm_87", "sm_89", "sm_90a", "sm_100a", "sm_103a", "sm_120a"'
    every = MANIFEST.replace("\n[build.cpu]", f"\n[constraints]\narchitectures = [{shipped}]\n\n[build.cpu]", 1)
    assert lint(kernel(tmp_path / "every", every)) == []


def test_a_kernel_toml_at_the_repository_root_whose_globs_take_the_whole_repository_is_an_error(tmp_path):
    (tmp_path / ".git").mkdir()
    root = tmp_path / "kernel.toml"
    shutil.copytree(TUTORIAL, tmp_path, dirs_exist_ok=True)
    (tmp_path / "reference.py").write_text("def make_inputs(case, device, seed): ...\ndef reference(a, b, c): ...\n")
    root.write_text(MANIFEST.replace('globs = ["ops/csrc/**"]', 'globs = ["**"]'))
    assert [(f.line, f.rule, f.message) for f in lint(root)] == [
        (
            3,
            "KERN001",
            'globs \'**\': a kernel at the repository root names its own files ("*.cu", "main.cpp", "csrc/**"), '
            "never the whole repository (docs/, tests/, .github/ are not its sources)",
        )
    ]
    root.write_text(MANIFEST.replace('globs = ["ops/csrc/**"]', 'globs = ["*.cpp", "cuda/**", "kernel.toml"]'))
    assert lint(root) == []
    (tmp_path / "ops").mkdir()  # the same wide glob one folder down names only that folder's files: allowed
    nested = tmp_path / "ops" / "kernel.toml"
    nested.write_text(MANIFEST.replace('globs = ["ops/csrc/**"]', 'globs = ["**"]'))
    assert not [f for f in lint(nested) if "repository root" in f.message]
