"""Launch descriptions (kernel.toml [launch]): the safe evaluator, matching compiled functions, every allowed
config of the three kernels, and the launchers' own numbers (compiled with nvcc, nothing launches)."""

from __future__ import annotations

import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from bot.config import expr
from bot.config.manifest import load_kernel
from bot.config.manifest_tables import Launch
from bot.errors import InputError
from bot.models.finding import Phrase
from bot.models.report import Resource
from bot.verdict.gate_resources import SMEM_PER_BLOCK_LIMIT
from bot.verdict.launch import (
    ReadBack,
    SiteTouch,
    describe,
    describe_kernel,
    marked_function,
    matches,
    name_path,
    plain,
    read_back,
    shared_keys,
    touch_phrase,
    undecided_launches,
    values,
)
from bot.wording.messages import phrase
from tests.conftest import KERNELS
from tests.cuda_launcher import LAUNCHERS, configs, read_launchers

NAMES = sorted(LAUNCHERS)


def english(phrases: list[Phrase]) -> list[str]:
    """The lines a report stores (and an English comment shows) for these phrases."""
    return [phrase(p) for p in phrases]


needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on the PATH")


# -- the expression language --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("stages * (tile_m * tile_k + tile_k * tile_n) * 2", 3 * (128 * 64 + 64 * 128) * 2),
        ("max(2, min(4, 115712 // (2 * tile_k * (tile_m + tile_n))))", 3),
        ("tile_m / 2 - -tile_k + (+1)", 64 + 64 + 1),
        ("-7 // 2", -4),
    ],
)
def test_arithmetic_over_tunables_evaluates(text, expected):
    assert expr.value(text, {"tile_m": 128, "tile_n": 128, "tile_k": 64, "stages": 3}) == expected


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("tile_m ** 2", "the power operator ** is not allowed"),
        ("tile_m % 3", "the operator % is not allowed"),
        ("__import__('os').system('true')", "a call of anything but min() or max()"),
        ("tile_m.bit_length()", "a call of anything but min() or max()"),
        ("min(tile_m)", "a call of anything but min() or max() with two or more arguments"),
        ("max(*[tile_m, 1])", "a call of anything but min() or max()"),
        ("tile_m if tile_n else 1", "a conditional (x if c else y) is not allowed"),
        ("tile_m > 64", "a comparison is not allowed"),
        ("1.5 * tile_m", "the constant 1.5 is not allowed"),
        ("True + 1", "the constant True is not allowed"),
        ("'64'", "the constant '64' is not allowed"),
        ("[tile_m][0]", "indexing is not allowed"),
        ("lambda: 1", "a lambda is not allowed"),
        ("tile_m +", "not an arithmetic expression"),
        ("-" * 990 + "1", "nested too deeply"),
        ("1" + " + 1" * 300, "longer than 1000 characters"),
    ],
)
def test_anything_outside_the_allow_list_is_refused(text, why):
    with pytest.raises(expr.ExprError, match=why.replace("(", r"\(").replace(")", r"\)").replace("*", r"\*")):
        expr.parse(text)


def test_evaluation_errors_say_what_went_wrong():
    with pytest.raises(expr.ExprError, match="division by zero"):
        expr.value("tile_m // (tile_n - tile_n)", {"tile_m": 1, "tile_n": 2})
    with pytest.raises(expr.ExprError, match=r"7 / 2 is not a whole number \(use // to round down\)"):
        expr.value("tile_m / 2", {"tile_m": 7})
    with pytest.raises(expr.ExprError, match="exceeds"):
        expr.value("a * a * a * a * a", {"a": 2**20})
    with pytest.raises(expr.ExprError, match="unknown name 'stages'"):
        expr.value("stages * 2", {})


def _folder_with(tmp_path: Path, launch: str, kernel: str = "deepgemm_tile") -> Path:
    folder = tmp_path / kernel
    shutil.copytree(KERNELS / kernel, folder)
    text = (folder / "kernel.toml").read_text()
    start = text.index("[launch.values]")
    end = text.index("[reference]")
    (folder / "kernel.toml").write_text(text[:start] + launch + "\n" + text[end:])
    return folder


@pytest.mark.parametrize(
    ("launch", "message"),
    [
        (
            '[launch.functions.gemm_bf16_kernel]\ndynamic_smem = "tile_m ** 2"',
            "launch.functions.gemm_bf16_kernel.dynamic_smem = 'tile_m ** 2': the power operator ** is not allowed",
        ),
        (
            '[launch.functions.gemm_bf16_kernel]\ndynamic_smem = "stages * 2"',
            "dynamic_smem = 'stages * 2': unknown name 'stages' (known: tile_k, tile_m, tile_n)",
        ),
        (
            '[launch.values]\ntwo = "stages * 2"\nstages = "3"',
            "launch.values.two = 'stages * 2': unknown name 'stages'",  # values are read in order
        ),
        ('[launch.values]\ntile_m = "64"', "launch.values.tile_m: shadows the tunable of the same name"),
        ('[launch.values]\nmin = "64"', "launch.values: 'min' is not a usable name"),
        ('[launch.functions."gemm(int)"]\ndynamic_smem = 0', "launch.functions: 'gemm(int)' is not a function name"),
        ("[launch.functions.gemm_bf16_kernel]\ndynamic_smem = -1", "dynamic_smem = -1: must not be negative"),
        ("[launch.functions.gemm_bf16_kernel]\ndynamic_smem = 1.5", "dynamic_smem"),
        ("[launch.functions.gemm_bf16_kernel]\nsmem = 1", "smem: Extra inputs are not permitted"),
    ],
)
def test_a_bad_launch_description_is_bad_input_naming_the_manifest_and_expression(tmp_path, launch, message):
    folder = _folder_with(tmp_path, launch)
    with pytest.raises(InputError) as info:
        load_kernel(folder)
    assert str(info.value).startswith(f"{folder / 'kernel.toml'}: launch")
    assert message in str(info.value)


# -- which compiled function a key names ---------------------------------------------------------------

GEMM = "void deepgemm_tile::gemm_bf16_kernel<128, 128, 64, true>(unsigned short const*, float*, int)"
MLA = "flashmla_decode::(anonymous namespace)::mla_decode_kernel(unsigned short const*, float)"


def test_function_names_drop_templates_parameters_return_type_and_anonymous_namespaces():
    assert name_path(GEMM) == ("deepgemm_tile", "gemm_bf16_kernel")
    assert name_path(MLA) == ("flashmla_decode", "mla_decode_kernel")
    assert name_path("void ns::k<ns::Cfg<1, 2>, (int)3>(ns::Cfg<1, 2>)") == ("ns", "k")
    assert name_path("plain_c") == ("plain_c",)


def test_a_key_names_every_instantiation_by_name_or_qualified_name():
    assert matches("gemm_bf16_kernel", GEMM) and matches("deepgemm_tile::gemm_bf16_kernel", GEMM)
    assert not matches("bf16_kernel", GEMM) and not matches("other::gemm_bf16_kernel", GEMM)
    assert matches("mla_decode_kernel", MLA) and matches("flashmla_decode::mla_decode_kernel", MLA)
    mangled = "_ZN13deepgemm_tile16gemm_bf16_kernelILi128ELi128ELi64ELb1EEEvPKtS2_Pfiiiiiii"
    assert matches("gemm_bf16_kernel", mangled) and matches("deepgemm_tile::gemm_bf16_kernel", mangled)
    assert not matches("bf16_kernel", mangled)


# -- describe: launches and occupancy of compiled functions ----------------------------------------------


def _launch(**functions: dict) -> Launch:
    return Launch.model_validate({"values": {"stages": "max(2, tile_k // 16)"}, "functions": functions})


def test_a_described_function_gets_threads_dynamic_smem_and_occupancy():
    r = Resource(function=GEMM, registers=242, extern_smem=True)
    d = describe([r], {GEMM: 128}, _launch(gemm_bf16_kernel={"dynamic_smem": "stages * 32768"}), {"tile_k": 48}, "k")
    assert english(d.errors) == [] and english(d.notes) == []
    [out] = d.resources
    assert (out.threads, out.dynamic_smem_bytes) == (128, 3 * 32768)
    assert out.occupancy is not None and out.occupancy.blocks_per_sm == 2


def test_occupancy_is_computed_on_each_architecture_with_a_table_and_named_where_none_is():
    r = Resource(function=GEMM, registers=242, extern_smem=True)
    launch = _launch(gemm_bf16_kernel={"dynamic_smem": "stages * 32768"})
    for arch, blocks in (("sm_75", 0), ("sm_80", 1), ("sm_86", 1), ("sm_90a", 2), ("sm_120a", 1)):
        d = describe([r], {GEMM: 128}, launch, {"tile_k": 48}, "k", arch=arch)  # 96 KiB: over a T4's 64
        [out] = d.resources
        assert english(d.notes) == [] and out.occupancy is not None, arch
        assert (out.occupancy.arch, out.occupancy.blocks_per_sm) == (arch.rstrip("a"), blocks)
    d = describe([r], {GEMM: 128}, launch, {"tile_k": 48}, "k", arch="sm_110a")
    assert d.resources[0].occupancy is None
    assert english(d.notes) == [
        "occupancy not computed for sm_110a: no table "
        "(opgate has sm_75, sm_80, sm_86, sm_87, sm_89, sm_90, sm_100, sm_103, sm_120)"
    ]


def test_dynamic_shared_memory_nobody_sized_is_an_error_naming_the_function():
    r = Resource(function=MLA, registers=96, extern_smem=True)
    d = describe([r], {MLA: 256}, Launch(), {}, "kernels/flashmla_decode/kernel.toml")
    assert english(d.errors) == [
        f"{MLA} uses dynamic shared memory (extern __shared__) that kernels/flashmla_decode/kernel.toml does not "
        "size: add [launch.functions.mla_decode_kernel] dynamic_smem"
    ]
    assert d.resources[0].dynamic_smem_bytes is None and d.resources[0].occupancy is None


def test_a_template_of_ten_unsized_instantiations_is_one_error_naming_the_ten():
    functions = [f"void vec_kernel<{n}u>(float const*, float*)" for n in range(32, 352, 32)]
    rows = [Resource(function=f, registers=16, extern_smem=True) for f in functions]
    rows.append(Resource(function="void other_kernel(int*)", registers=8, extern_smem=True))
    d = describe(rows, dict.fromkeys(functions, 128), Launch(), {}, "ops/v/kernel.toml")
    assert english(d.errors) == [
        "vec_kernel (10 instantiations) uses dynamic shared memory (extern __shared__) that "
        "ops/v/kernel.toml does not size: add [launch.functions.vec_kernel] dynamic_smem",
        "void other_kernel(int*) uses dynamic shared memory (extern __shared__) that ops/v/kernel.toml does not size: "
        "add [launch.functions.other_kernel] dynamic_smem",
    ]
    assert all(r.dynamic_smem_bytes is None and r.occupancy is None for r in d.resources)
    [named] = d.errors[0].phrases["functions"]  # the ten whole names stay the phrase's data
    assert named.params["functions"] == "; ".join(functions)


def test_a_function_without_extern_shared_memory_needs_no_description():
    r = Resource(function="merge(int)", registers=31, smem_bytes=0)
    d = describe([r], {"merge(int)": 128}, Launch(), {}, "k")
    assert english(d.errors) == [] and d.resources[0].dynamic_smem_bytes == 0
    assert d.resources[0].occupancy is not None and d.resources[0].occupancy.occupancy_pct == 100.0


def test_a_description_that_leaves_out_the_size_of_an_extern_array_is_an_error():
    launch = _launch(gemm_bf16_kernel={"threads": 128})
    d = describe([Resource(function=GEMM, registers=64, extern_smem=True)], {GEMM: 128}, launch, {"tile_k": 32}, "k")
    assert [e.split(" uses ")[1] for e in english(d.errors)] == [
        "dynamic shared memory (extern __shared__) that k does not size: add [launch.functions.gemm_bf16_kernel] "
        "dynamic_smem"
    ]
    assert d.resources[0].dynamic_smem_bytes is None and d.resources[0].threads == 128


@pytest.mark.parametrize("stale", ["2 * 128", "64"])
def test_a_thread_count_other_than_the_codes_is_an_error_naming_both_and_the_codes_is_used(stale):
    launch = _launch(gemm_bf16_kernel={"threads": stale, "dynamic_smem": 0})
    d = describe([Resource(function=GEMM, registers=64)], {GEMM: 128}, launch, {"tile_k": 32}, "k")
    given = 256 if stale == "2 * 128" else 64
    assert english(d.errors) == [
        f"k: launch.functions.gemm_bf16_kernel.threads = {given} but the code says 128 threads per block for {GEMM} "
        "(__launch_bounds__, in its PTX): the occupancy uses the code's 128; correct kernel.toml or drop it"
    ]
    [r] = d.resources
    assert r.threads == 128 and r.occupancy is not None and r.occupancy.warps_per_sm == 32  # 8 blocks x 4 warps


def test_an_expression_that_fails_for_this_config_is_an_error_with_the_tunables():
    launch = _launch(gemm_bf16_kernel={"dynamic_smem": "32768 // (tile_k - 64)"})
    d = describe([Resource(function=GEMM, registers=64, extern_smem=True)], {GEMM: 128}, launch, {"tile_k": 64}, "k")
    where = "k: launch.functions.gemm_bf16_kernel.dynamic_smem"
    assert english(d.errors) == [f"{where} = '32768 // (tile_k - 64)': division by zero (with tile_k=64)"]
    bad = describe([Resource(function=GEMM, registers=64)], {GEMM: 128}, _launch(), {"tile_k": "wide"}, "k")
    assert english(bad.errors) == [
        "k: launch.values.stages = 'max(2, tile_k // 16)': tunable 'tile_k' = 'wide' is not an integer "
        "(with tile_k=wide)"
    ]


def test_unknown_threads_and_unused_descriptions_are_notes():
    launch = _launch(gone_kernel={"dynamic_smem": 0})
    d = describe([Resource(function="k(int)", registers=8)], {}, launch, {"tile_k": 32}, "m")
    assert english(d.errors) == []
    assert english(d.notes) == [
        "occupancy of k(int) not computed: threads per block unknown (give __launch_bounds__ or threads in m "
        "[launch.functions])",
        "m: launch.functions.gone_kernel names no compiled kernel function",
    ]


# -- every allowed config of the three kernels --------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_every_allowed_config_has_a_valid_launch_within_the_smem_limit(name):
    kernel = load_kernel(KERNELS / name)
    for config in configs(kernel):
        env = values(kernel.manifest.launch, config, name)
        for function, spec in kernel.manifest.launch.functions.items():
            dynamic = expr.value(spec.dynamic_smem or 0, env)
            assert 0 <= dynamic <= SMEM_PER_BLOCK_LIMIT, (config, function, dynamic)
            if spec.threads is not None:
                assert 32 <= expr.value(spec.threads, env) <= 1024, (config, function)
    assert len(configs(kernel)) == {"deepgemm_tile": 27, "flashmla_decode": 9, "v41_attention_splitk": 8}[name]


@pytest.mark.parametrize("name", NAMES)
def test_every_described_function_has_a_launcher_probe(name):
    """A new [launch.functions] entry needs a line in tests/cuda_launcher.py, or it would go unchecked."""
    described = set(load_kernel(KERNELS / name).manifest.launch.functions)
    probed = {f for f, launcher in LAUNCHERS[name].functions.items() if launcher.dynamic_smem is not None}
    assert described == probed


def _check_config(kernel, config, workdir: Path) -> list[str]:
    """Problems with one config: the launcher's numbers against the manifest's, smem, occupancy."""
    found = read_launchers(kernel, config, workdir)
    if found.error:
        return [found.error]
    problems = []
    k = kernel.model_copy(update={"config": config})
    described = describe_kernel(k, found.resources, found.threads)
    problems += [f"{config}: {e}" for e in english(described.errors)]
    for name, launcher in LAUNCHERS[kernel.name].functions.items():
        threads, dynamic = found.launcher[name]
        rows = [r for r in described.resources if matches(name, r.function)]
        if not rows:
            problems.append(f"{config}: {name} was not compiled")
        for r in rows:
            if (r.threads, r.dynamic_smem_bytes) != (threads, dynamic):
                problems.append(
                    f"{config}: {r.function}: kernel.toml says {r.threads} threads, {r.dynamic_smem_bytes} B "
                    f"dynamic smem; the launcher uses {threads}, {dynamic}"
                )
            if launcher.dynamic_smem is None and r.extern_smem:
                problems.append(f"{config}: {r.function} has extern shared memory the launcher program does not read")
            if r.smem_bytes + (r.dynamic_smem_bytes or 0) > SMEM_PER_BLOCK_LIMIT or r.spill_bytes:
                problems.append(f"{config}: {r.function}: smem {r.smem_bytes} + {r.dynamic_smem_bytes}, spills")
            if r.occupancy is None or r.occupancy.blocks_per_sm < 1:
                problems.append(f"{config}: {r.function} cannot be resident: {r.occupancy}")
    return problems


@pytest.mark.slow
@pytest.mark.untimed
@needs_nvcc
@pytest.mark.parametrize("name", NAMES)
def test_the_launcher_uses_the_manifests_threads_and_dynamic_smem_for_every_allowed_config(name, tmp_path):
    """Compiled with nvcc for sm_90a (ptxas -v) and run on the host: the launcher's numbers, nothing launched."""
    kernel = load_kernel(KERNELS / name)
    all_configs = configs(kernel)
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(lambda ic: _check_config(kernel, ic[1], tmp_path / str(ic[0])), enumerate(all_configs)))
    problems = [p for r in results for p in r]
    assert not problems, "\n".join(problems)


# -- the launches as the code makes them (read back by the fold) ------------------------------------------------------

GEMM3 = "void ns::gemm<128, 3>(float const*, float*)"
GEMM4 = "void ns::gemm<128, 4>(float const*, float*)"
SITE = "k/gemm.cu:40 kernel<<<…, Plan::kThreads, Plan::kSmem>>>"


def _declared(function: str) -> Resource:
    """What kernel.toml's one `[launch.functions.gemm]` gives every instantiation: 128 threads, 98,304 B."""
    return Resource(
        function=function, registers=128, smem_bytes=0, extern_smem=True, threads=128, dynamic_smem_bytes=98_304
    )


def test_names_of_a_ptxas_function_and_of_a_fold_marker_agree():
    assert plain(GEMM3) == "ns::gemm<128, 3>"
    assert (
        plain("ns::(anonymous namespace)::decode(unsigned short const*, float)") == "ns::(anonymous namespace)::decode"
    )
    assert marked_function(
        "void opgate_fold::site_value<1, &(void ns::gemm<128, 3>(float const*, float*)), 98304ull>()"
    ) == ("ns::gemm<128, 3>")
    assert marked_function("void opgate_fold::site_value<0, &ns::(anonymous namespace)::decode, 256ull>()") == (
        "ns::(anonymous namespace)::decode"
    )
    assert marked_function("void ns::gemm<128, 3>(float const*, float*)") == ""


def test_each_instantiation_gets_the_size_its_own_launch_asks_and_the_declared_one_is_kept_beside():
    values = [
        ReadBack(SITE, "threads", "ns::gemm<128, 3>", 128),
        ReadBack(SITE, "smem", "ns::gemm<128, 3>", 98_304),
        ReadBack(SITE, "threads", "ns::gemm<128, 4>", 128),
        ReadBack(SITE, "smem", "ns::gemm<128, 4>", 163_840),
    ]
    (three, four), notes = read_back([_declared(GEMM3), _declared(GEMM4)], values)
    assert (three.dynamic_smem_bytes, three.launch_from, three.declared_dynamic_smem_bytes) == (
        98_304,
        "read back",
        98_304,
    )
    assert (four.dynamic_smem_bytes, four.declared_dynamic_smem_bytes, four.declared_threads) == (163_840, 98_304, 128)
    assert three.occupancy is not None and four.occupancy is not None
    assert (three.occupancy.blocks_per_sm, four.occupancy.blocks_per_sm) == (2, 1)
    assert english(notes) == [
        f"{GEMM4}: kernel.toml [launch] declares 98,304 B of dynamic shared memory and 128 threads; "
        f"the launch ({SITE}) asks 163,840 B and 128 threads: judged as the code launches it"
    ]
    untouched, none = read_back([_declared(GEMM3)], [])
    assert untouched == [_declared(GEMM3)] and none == []


def test_an_instantiation_launched_at_two_sizes_is_judged_at_the_worse_of_them():
    values = [
        ReadBack(SITE, "smem", "ns::gemm<128, 3>", 1024),
        ReadBack("k/b.cu:9 …", "smem", "ns::gemm<128, 3>", 4096),
    ]
    (r,), notes = read_back([_declared(GEMM3)], values)
    assert r.dynamic_smem_bytes == 4096
    assert phrase(notes[0]) == (
        f"{GEMM3} is launched with 1,024 B, 4,096 B of dynamic shared memory and its declared threads: judged at the "
        "largest shared memory and the block size with the fewest resident warps"
    )


def test_a_marker_the_kernels_own_code_adds_can_only_make_its_occupancy_worse():
    """163,840 B allows one block per SM: 128 threads keep 4 warps, a forged 256-thread marker would show 8."""
    real = [ReadBack(SITE, "threads", "ns::gemm<128, 4>", 128), ReadBack(SITE, "smem", "ns::gemm<128, 4>", 163_840)]
    forged = ReadBack("k/gemm.cu:1 …", "threads", "ns::gemm<128, 4>", 256)
    alone = Resource(function=GEMM4, registers=64, extern_smem=True, threads=128, dynamic_smem_bytes=98_304)
    (honest,), _ = read_back([alone], real)
    (with_forgery,), _ = read_back([alone], [*real, forged])
    assert honest.occupancy is not None and with_forgery.occupancy is not None
    assert (
        (with_forgery.threads, with_forgery.occupancy.warps_per_sm) == (128, honest.occupancy.warps_per_sm) == (128, 4)
    )


def test_a_touched_launch_that_was_not_read_back_is_undecided_naming_the_file_and_the_launch():
    touch = SiteTouch(touch_phrase("k/gemm.cu", "holds", (), [SITE]), (SITE,), "gemm")
    constant = Phrase(key="launch.not_constant", params={"error": "error: expression must have a constant value"})
    why = {SITE: [Phrase(key="launch.its_smem", phrases={"why": [constant]})]}
    assert english(undecided_launches([_declared(GEMM3)], [touch], why)) == [
        f"launch figures declared, not measured: k/gemm.cu holds the launch: {SITE} (its dynamic shared memory: not a "
        "compile-time constant (error: expression must have a constant value)): its shared memory and occupancy are "
        "undecided"
    ]
    (declared,) = english(undecided_launches([_declared(GEMM3), _declared(GEMM4)], [touch], {}))
    assert f"the compiler read back no launch of {GEMM3}, {GEMM4}" in declared
    other = SiteTouch(touch_phrase("x", "holds", (), ["k/a.cu:1 fn<<<…>>>"]), ("k/a.cu:1 fn<<<…>>>",), "fn")
    (unknown,) = english(undecided_launches([_declared(GEMM3)], [other], {}))
    assert "no compiled kernel function is named 'fn'" in unknown
    read, _ = read_back([_declared(GEMM3)], [ReadBack(SITE, "smem", "ns::gemm<128, 3>", 98_304)])
    assert undecided_launches(read, [touch], {}) == []


def test_one_declared_figure_for_several_instantiations_says_none_has_its_own():
    launch = Launch.model_validate({"functions": {"gemm": {"dynamic_smem": 98_304}}})
    (note,) = english(shared_keys([_declared(GEMM3), _declared(GEMM4)], launch, "k/kernel.toml"))
    assert note == (
        f"k/kernel.toml: launch.functions.gemm describes 2 instantiations ({GEMM3}; {GEMM4}) with one declared figure: "
        "none has launch figures of its own"
    )
    read, _ = read_back([_declared(GEMM3), _declared(GEMM4)], [ReadBack(SITE, "smem", "ns::gemm<128, 4>", 1)])
    assert shared_keys(read, launch, "k/kernel.toml") == []  # only gemm<128, 3> left declared
    assert shared_keys([_declared(GEMM3)], launch, "k/kernel.toml") == []


def test_an_instantiation_key_gives_that_instantiation_figures_of_its_own():
    launch = Launch.model_validate(
        {"functions": {"gemm": {"dynamic_smem": 98_304}, "ns::gemm<128, 4>": {"dynamic_smem": 163_840}}}
    )
    compiled = [
        Resource(function=f, registers=128, extern_smem=True) for f in (GEMM3, GEMM4, "void ns::gemm<64, 4>(float*)")
    ]
    out = describe(compiled, {GEMM3: 128, GEMM4: 128, "void ns::gemm<64, 4>(float*)": 128}, launch, {}, "k/kernel.toml")
    assert english(out.errors) == []
    assert [r.dynamic_smem_bytes for r in out.resources] == [98_304, 163_840, 98_304]
    assert matches("gemm<128,4>", GEMM4) and not matches("gemm<128, 4>", GEMM3)
    (note,) = english(
        shared_keys(out.resources, launch, "k/kernel.toml")
    )  # gemm<128, 3> and gemm<64, 4> share the name's
    assert "launch.functions.gemm describes 2 instantiations" in note and GEMM4 not in note
    with pytest.raises(ValueError, match="one instantiation"):
        Launch.model_validate({"functions": {"gemm<1>; x": {"dynamic_smem": 1}}})
