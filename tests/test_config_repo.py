"""The repository's own configuration (bot/config/repo.py): layout, domains with their keys and budgets,
thresholds, ledger."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.config.manifest import load_kernel
from bot.config.repo import load_config
from bot.config.settings import load_settings
from bot.errors import InputError
from tests.conftest import KERNELS, REPO_CONFIG, ROOT, discover

MOE = """
manifests = ["ops/*/kernel.toml"]
ledger = "state/ledger.sqlite"

[thresholds]
tolerance = 0.05
max_regression_pct = 5.0
inconclusive = "fail"

[domains.moe]
weekly_budget = 90_000
request_budget = 3_000
label = "MoE routing"
"""


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_this_repository_configures_the_users_four_domains_with_todays_budgets():
    assert REPO_CONFIG.source.endswith("pyproject.toml [tool.opgate]")
    settings = load_settings({}, REPO_CONFIG)
    assert settings.budget_weekly.model_dump() == {
        "deepgemm": 500_000,
        "flashmla": 800_000,
        "v41_attention": 520_000,
        "ci_summary": 200_000,
    }
    assert settings.budget_request.model_dump() == {
        "deepgemm": 5_000,
        "flashmla": 6_000,
        "v41_attention": 8_000,
        "ci_summary": 12_000,
    }
    assert [settings.key_variable(d) for d in settings.domains] == [
        "TAOTOKEN_API_KEY_DEEPGEMM_AGENT",
        "TAOTOKEN_API_KEY_FLASHMLA_AGENT",
        "TAOTOKEN_API_KEY_V41_ATTENTION_AGENT",
        "TAOTOKEN_API_KEY_CI_SUMMARY",
    ]
    assert set(discover(ROOT, REPO_CONFIG)) == {p.name for p in KERNELS.iterdir() if (p / "kernel.toml").exists()}


def test_a_fifth_domain_from_opgate_toml_with_its_layout_ledger_and_policy(tmp_path):
    write(tmp_path / "opgate.toml", MOE)
    (tmp_path / ".git").mkdir()
    config = load_config(tmp_path / "ops")  # found from a folder below the repository root
    assert config.manifests == ["ops/*/kernel.toml"] and config.key_variable("moe") == "TAOTOKEN_API_KEY_MOE_AGENT"
    settings = load_settings({"TAOTOKEN_API_KEY_MOE_AGENT": "sk-moe-0123456789abcdef"}, config)
    assert settings.database_url == str(tmp_path / "state" / "ledger.sqlite") and not settings.create_ledger
    assert settings.inconclusive_policy == "fail" and settings.labels() == {"moe": "MoE routing"}
    assert settings.key_for("TAOTOKEN_API_KEY_MOE_AGENT") == "sk-moe-0123456789abcdef"
    override = load_settings({"OPGATE_INCONCLUSIVE_POLICY": "neutral", "OPGATE_DATABASE_URL": "x.sqlite"}, config)
    assert (override.inconclusive_policy, override.database_url) == ("neutral", "x.sqlite")


def test_the_environment_overrides_a_configured_domains_budgets_and_refuses_an_unknown_domain():
    settings = load_settings(
        {"OPGATE_BUDGET_WEEKLY_FLASHMLA": "7_000", "OPGATE_BUDGET_REQUEST_CI_SUMMARY": "99"}, REPO_CONFIG
    )
    assert settings.budget_weekly.get("flashmla") == 7_000 and settings.budget_request.get("ci_summary") == 99
    assert settings.budget_weekly.get("deepgemm") == 500_000
    with pytest.raises(InputError, match=r"OPGATE_BUDGET_WEEKLY_MOE: domain 'moe' is not configured.*\[tool.opgate"):
        load_settings({"OPGATE_BUDGET_WEEKLY_MOE": "1000"}, REPO_CONFIG)
    with pytest.raises(InputError, match="OPGATE_BUDGET_REQUEST_DEEPGEMM='lots': a positive whole number"):
        load_settings({"OPGATE_BUDGET_REQUEST_DEEPGEMM": "lots"}, REPO_CONFIG)


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("[domains.MoE]\nweekly_budget = 1\nrequest_budget = 1\n", "'MoE' is not a domain name"),
        ("[domains.moe]\nweekly_budget = 1\n", "domains.moe.request_budget: Field required"),
        ('[domains.moe]\nkey = "sk-live-0123456789abcdef"\nweekly_budget = 1\nrequest_budget = 1\n', "never a key"),
        ('[domains.moe]\nkey = "OPGATE_AGENT_KEY"\nweekly_budget = 1\nrequest_budget = 1\n', "opgate's own"),
        (
            '[domains.a]\nkey = "K_A"\nweekly_budget = 1\nrequest_budget = 1\n'
            '[domains.b]\nkey = "K_A"\nweekly_budget = 1\nrequest_budget = 1\n',
            "share the key K_A",
        ),
        ('manifests = ["/etc/*/kernel.toml"]\n', "inside the repository"),
        ("[thresholds]\ntolerance = -1\n", "tolerance: Input should be greater than 0"),
        ("[thresholds]\nmax_regresion_pct = 3\n", "max_regresion_pct: Extra inputs are not permitted"),
        ('[thresholds]\ninconclusive = "maybe"\n', "inconclusive must be neutral or fail"),
        ("kernels = 3\n", "kernels: Extra inputs are not permitted"),
        ('allow_self_accept = "yes"\n', "allow_self_accept: Input should be a valid boolean"),  # a weakening: said
    ],
)
def test_a_bad_configuration_is_one_line_naming_the_file_and_the_key(tmp_path, text, why):
    write(tmp_path / "opgate.toml", text)
    with pytest.raises(InputError, match=r"opgate\.toml: ") as caught:
        load_config(tmp_path)
    assert why in str(caught.value) and "\n" not in str(caught.value)


def test_self_acceptance_is_allowed_only_where_the_configuration_says_true(tmp_path):
    write(tmp_path / "pyproject.toml", "[tool.opgate]\nallow_self_accept = true\n")
    assert load_config(tmp_path).allow_self_accept is True
    write(tmp_path / "pyproject.toml", "[tool.opgate]\nallow_self_accept = false\n")
    assert load_config(tmp_path).allow_self_accept is False


def test_two_configurations_in_one_repository_are_refused(tmp_path):
    write(tmp_path / "opgate.toml", "")
    write(tmp_path / "pyproject.toml", '[tool.opgate]\nmanifests = ["k/*/kernel.toml"]\n')
    with pytest.raises(InputError, match=r"two opgate configurations.*keep one of them"):
        load_config(tmp_path)


def test_without_a_configuration_the_defaults_apply_and_no_domain_exists(tmp_path):
    (tmp_path / ".git").mkdir()
    config = load_config(tmp_path)
    assert (config.source, config.manifests, config.domains) == ("built-in defaults", ["kernels/*/kernel.toml"], {})
    assert config.allow_self_accept is False  # nobody accepts their own change unless the repository says so
    settings = load_settings({}, config)
    assert settings.create_ledger and settings.database_url == "reports/opgate.sqlite"


def test_a_manifest_names_a_configured_domain_and_inherits_the_repository_thresholds(tmp_path):
    write(tmp_path / "opgate.toml", MOE)
    config = load_config(tmp_path)
    kernel = tmp_path / "ops" / "router"
    write(kernel / "tile_config.json", "{}")
    manifest = (KERNELS / "deepgemm_tile" / "kernel.toml").read_text()
    manifest = manifest.replace('name = "deepgemm_tile"', 'name = "router"').replace('"deepgemm"', '"moe"')
    own = "[constraints]\ntolerance = 1e-2\nmax_regression_pct = 3.0\nmax_spill_bytes = 0\n"
    assert own in manifest
    manifest = manifest.replace(own, "[constraints]\nmax_spill_bytes = 64\n")
    write(kernel / "kernel.toml", manifest)
    loaded = load_kernel(kernel, config=config, path="ops/router")
    c = loaded.manifest.constraints
    assert (c.tolerance, c.max_regression_pct, c.max_spill_bytes) == (0.05, 5.0, 64)  # repo, repo, kernel's own
    assert loaded.path == "ops/router" and loaded.manifest.domain == "moe"
    assert set(discover(tmp_path, config)) == {"router"}
    write(kernel / "kernel.toml", manifest.replace('"moe"', '"mixture"'))
    with pytest.raises(InputError, match=r"domain 'mixture' is not configured \(configured: moe\); add "):
        load_kernel(kernel, config=config)


def test_two_kernels_with_one_name_are_refused(tmp_path):
    write(tmp_path / "opgate.toml", 'manifests = ["ops/*/kernel.toml", "more/*/kernel.toml"]\n')
    write(tmp_path / "ops" / "gemm" / "kernel.toml", "")
    write(tmp_path / "more" / "gemm" / "kernel.toml", "")
    with pytest.raises(InputError, match="two kernels named gemm: more/gemm/ and ops/gemm/; rename one"):
        discover(tmp_path, load_config(tmp_path))


MUL = """name = "mul"
domain = "moe"
globs = ["ops/mul/**"]
config = "none.json"

[build.cpu]
sources = ["mul.cpp", "binding.cpp"]
entry = "mul"
arguments = ["A", "B", "C", "s", "workspace"]
outputs = ["C"]
scratch = ["workspace"]

[buffers.C]
shape = ["m", "n"]

[buffers.workspace]
shape = ["max(1, n // 64)"]
dtype = "int32"

[[cases]]
name = "small"
dtype = "float32"
shape = { m = 200, n = 328, k = 16 }
"""


def test_output_and_scratch_arguments_take_their_shapes_from_each_case(tmp_path):
    kernel = write(tmp_path / "ops" / "mul" / "kernel.toml", MUL).parent
    manifest = load_kernel(kernel).manifest
    assert manifest.build["cpu"].inputs() == ["A", "B", "s"]
    assert manifest.written(manifest.cases[0]) == [
        {"name": "C", "role": "output", "shape": [200, 328], "dtype": "float32"},  # the case's dtype by default
        {"name": "workspace", "role": "scratch", "shape": [5], "dtype": "int32"},
    ]


@pytest.mark.parametrize(
    ("old", "new", "why"),
    [
        ('outputs = ["C"]', 'outputs = ["D"]', r"build\.cpu: outputs: 'D' is not an argument of the entry"),
        ('[buffers.C]\nshape = ["m", "n"]\n', "", r"build\.cpu\.outputs names 'C', but no \[buffers\.C\] gives"),
        ('shape = ["m", "n"]', 'dtype = "float32"', r"buffers\.C\.shape: Field required"),
        ('shape = ["m", "n"]', 'shape = ["m", "q"]', r"buffers\.C\.shape over case small's shape: 'q': "),
        ('arguments = ["A", "B", "C", "s", "workspace"]\n', "", r"outputs/scratch need `arguments`"),
        ('scratch = ["workspace"]', 'scratch = ["workspace", "C"]', r"C is both an output and scratch"),
        ('outputs = ["C"]\n', "", r"arguments/scratch need `outputs`"),
        ('dtype = "int32"', 'dtype = "int4"', r"buffers\.workspace\.dtype: Input should be 'float64', "),
    ],
)
def test_a_bad_output_or_scratch_argument_is_one_line_naming_the_key(tmp_path, old, new, why):
    assert old in MUL
    kernel = write(tmp_path / "ops" / "mul" / "kernel.toml", MUL.replace(old, new, 1)).parent
    with pytest.raises(InputError, match=why):
        load_kernel(kernel)


ROOT_MANIFEST = """
name = "flash"
domain = "moe"
globs = [GLOBS]
[build.cuda]
sources = ["flash.cu"]
"""


def test_a_kernel_toml_at_the_repository_root_is_a_kernel_whose_globs_alone_name_its_files(tmp_path):
    from bot.config.manifest import ROOT as AT_ROOT
    from bot.config.manifest import find_manifests

    write(tmp_path / "opgate.toml", MOE.replace('"ops/*/kernel.toml"', '"kernel.toml"'))
    write(tmp_path / "flash.cu", "__global__ void k() {}\n")
    write(tmp_path / "kernel.toml", ROOT_MANIFEST.replace("GLOBS", '"*.cu", "kernel.toml"'))
    assert find_manifests(tmp_path, ["kernel.toml"]) == {"flash": AT_ROOT}
    kernel = discover(tmp_path, load_config(tmp_path))["flash"]
    assert kernel.path == "." and kernel.folder == tmp_path and kernel.globs == ["*.cu", "kernel.toml"]
    for wide in ('"**"', '"*"', '"**/*.cu"'):
        write(tmp_path / "kernel.toml", ROOT_MANIFEST.replace("GLOBS", wide))
        with pytest.raises(InputError, match=r"kernel.toml: globs .*a kernel at the repository root names its own"):
            discover(tmp_path, load_config(tmp_path))
    write(tmp_path / "kernel.toml", "not toml [")  # a root manifest that does not parse: named root, not the folder
    assert find_manifests(tmp_path, ["kernel.toml"]) == {"root": AT_ROOT}
