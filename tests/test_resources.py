"""bot.resources: ptxas -v parsing on recorded nvcc 13 output, and real compile-only checks when nvcc is present."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import pytest

from bot.config.manifest_tables import Constraints
from bot.models.finding import Phrase
from bot.untrusted import resources
from bot.untrusted.resources import (
    ResourceCheck,
    ResourceStatus,
    cache_key,
    compile_resources,
    demangle,
    parse_ptx_extern_smem,
    parse_ptx_threads,
    parse_ptxas,
)
from bot.untrusted.sandbox import Isolation, Sandbox
from tests.gate_lines import resource_reasons

DATA = Path(__file__).parent / "data" / "ptxas"
NVCC = shutil.which("nvcc")
needs_nvcc = pytest.mark.skipif(NVCC is None, reason="nvcc not on PATH: real compile checks skipped")


def fixture(name: str) -> str:
    return (DATA / name).read_text()


def by_name(text: str, arch: str | None = None) -> dict[str, resources.Resource]:
    return {r.function: r for r in parse_ptxas(text, arch)}


# -- parse_ptxas on recorded output -----------------------------------------------------------------


def test_clean_kernel_has_no_spills() -> None:
    [r] = parse_ptxas(fixture("nvcc13_sm90a_clean.txt"))
    assert r.function == "_Z7add_onePfi"
    assert (r.registers, r.spill_bytes, r.smem_bytes, r.stack_bytes) == (8, 0, 0, 0)


def test_spills_are_stores_plus_loads() -> None:
    [r] = parse_ptxas(fixture("nvcc13_sm90a_spill.txt"))
    assert r.function == "_Z3hogPKfPfi"
    assert r.registers == 32  # __launch_bounds__(1024, 2) caps it
    assert (r.spill_store_bytes, r.spill_load_bytes, r.spill_bytes) == (4276, 4420, 8696)
    assert r.stack_bytes == 2032


def test_spill_warning_line_is_not_a_frame_line() -> None:
    """-Xptxas -warn-spills adds a warning with the same byte counts before the entry; no double count."""
    assert parse_ptxas(fixture("nvcc13_sm90a_spill_warn.txt")) == parse_ptxas(fixture("nvcc13_sm90a_spill.txt"))


def test_device_functions_are_not_kernels() -> None:
    found = by_name(fixture("nvcc13_sm90a_mixed.txt"))
    assert list(found) == ["_Z8dyn_smemPf", "plain_c", "_Z5tiledILi32EEvPKfPfi", "_Z5tiledILi16EEvPKfPfi"]
    assert "_Z6helperPKfi" not in found  # "Function properties" only, never "Compiling entry function"
    tiled = found["_Z5tiledILi32EEvPKfPfi"]
    assert (tiled.registers, tiled.smem_bytes, tiled.stack_bytes, tiled.spill_bytes) == (32, 4224, 64, 0)
    assert found["_Z5tiledILi16EEvPKfPfi"].smem_bytes == 1088
    assert found["_Z8dyn_smemPf"].smem_bytes == 0  # dynamic shared memory is not known at compile time


def test_cmem_format_parses_like_sm90a() -> None:
    """sm_80 lines end with `N bytes cmem[0]`; sm_90a (nvcc 13) lines have none."""
    sm80 = by_name(fixture("nvcc13_sm80_mixed.txt"))
    sm90 = by_name(fixture("nvcc13_sm90a_mixed.txt"))
    assert sm80 == sm90


def test_rdc_device_function_spills_are_not_attributed_to_a_kernel() -> None:
    found = by_name(fixture("nvcc13_sm90a_rdc.txt"))
    assert len(found) == 4
    assert all(r.spill_bytes == 0 for r in found.values())  # only `_Z6helperPKfi$1` spills (16 + 16 B)
    assert found["plain_c"].registers == 24


def test_multi_arch_output_and_the_arch_filter() -> None:
    text = fixture("nvcc13_multiarch.txt")
    assert [r.function for r in parse_ptxas(text)] == ["_Z5scalePffi", "_Z5scalePffi"]
    assert len(parse_ptxas(text, "sm_90a")) == 1
    assert parse_ptxas(text, "sm_100a") == []


def test_legacy_layout_without_barriers() -> None:
    found = by_name(fixture("legacy_cuda11_style.txt"))
    assert list(found) == ["_Z6reduceILi256EEvPKfPfi", "_Z4copyPfPKf"]
    assert (found["_Z6reduceILi256EEvPKfPfi"].registers, found["_Z6reduceILi256EEvPKfPfi"].smem_bytes) == (16, 1024)
    copy = found["_Z4copyPfPKf"]
    assert (copy.spill_store_bytes, copy.spill_load_bytes, copy.spill_bytes, copy.stack_bytes) == (12, 20, 32, 8)


def test_smem_over_the_limit_is_still_reported_when_ptxas_fails() -> None:
    [r] = parse_ptxas(fixture("nvcc13_sm90a_smem_error.txt"))
    assert r.smem_bytes == 280_000


def test_properties_printed_before_the_entry_line_still_count() -> None:
    text = textwrap.dedent("""\
        ptxas info    : Function properties for k
            16 bytes stack frame, 4 bytes spill stores, 8 bytes spill loads
        ptxas info    : Compiling entry function 'k' for 'sm_90a'
        ptxas info    : Used 40 registers, used 1 barriers, 2048 bytes smem
        """)
    [r] = parse_ptxas(text)
    assert (r.registers, r.spill_bytes, r.stack_bytes, r.smem_bytes) == (40, 12, 16, 2048)


def test_nothing_to_parse() -> None:
    assert parse_ptxas("") == []
    assert parse_ptxas("bad.cu(1): error: identifier is undefined\n") == []


# -- threads per block from PTX ----------------------------------------------------------------------


def test_launch_bounds_from_recorded_ptx() -> None:
    threads = parse_ptx_threads(fixture("nvcc13_sm90a_mixed_ptx.txt"))
    assert threads == {"_Z5tiledILi16EEvPKfPfi": 256, "_Z5tiledILi32EEvPKfPfi": 1024}  # no bounds: not listed


def test_reqntid_and_multi_dimensional_bounds() -> None:
    ptx = textwrap.dedent("""\
        .visible .entry a(
            .param .u64 a_param_0
        )
        .maxntid 128
        .minnctapersm 2
        {
            ret;
        }
        .visible .entry b()
        .reqntid 32, 4, 2
        {
            ret;
        }
        .visible .entry c()
        {
        }
        """)
    assert parse_ptx_threads(ptx) == {"a": 128, "b": 256}


def test_extern_shared_memory_users_from_recorded_ptx() -> None:
    """`extern __shared__ float buf[]` is sized at launch: only the entry that touches it is a user."""
    assert parse_ptx_extern_smem(fixture("nvcc13_sm90a_mixed_ptx.txt")) == {"_Z8dyn_smemPf"}


def test_an_extern_array_used_by_one_of_two_entries() -> None:
    ptx = textwrap.dedent("""\
        .extern .shared .align 128 .b8 _ZN2ns4smemE[];
        .visible .entry a()
        .maxntid 128
        {
            mov.u32 %r1, _ZN2ns4smemE;
            ret;
        }
        .visible .entry b()
        {
            mov.u32 %r1, _ZN2ns4smemE_other;
            ret;
        }
        """)
    assert parse_ptx_extern_smem(ptx) == {"a"}
    assert parse_ptx_extern_smem(ptx.replace(".extern .shared", ".shared")) == set()  # a static array


def test_named_barriers_are_parsed_where_ptxas_prints_them() -> None:
    found = by_name(fixture("nvcc13_sm90a_mixed.txt"))
    assert (found["_Z8dyn_smemPf"].barriers, found["plain_c"].barriers) == (1, 0)
    assert {r.barriers for r in parse_ptxas(fixture("legacy_cuda11_style.txt"))} == {None}


# -- cache key, demangling, no nvcc ---------------------------------------------------------------------


def _tree(root: Path, kernel: str = "__global__ void k(float* x) { x[0] = 1; }\n") -> Path:
    (root / "inc").mkdir(parents=True)
    (root / "k.cu").write_text(kernel)
    (root / "inc" / "tile.cuh").write_text("#define TILE 16\n")
    return root / "k.cu"


def test_cache_key_ignores_where_the_tree_is_checked_out(tmp_path: Path) -> None:
    a, b = _tree(tmp_path / "a"), _tree(tmp_path / "b")
    key_a = cache_key([a], [a.parent], ["-DTILE_M=64"], "sm_90a", "nvcc 13.0")
    assert key_a == cache_key([b], [b.parent], ["-DTILE_M=64"], "sm_90a", "nvcc 13.0")
    assert key_a != cache_key([a], [a.parent], ["-DTILE_M=128"], "sm_90a", "nvcc 13.0")
    assert key_a != cache_key([a], [a.parent], ["-DTILE_M=64"], "sm_100a", "nvcc 13.0")
    assert key_a != cache_key([a], [a.parent], ["-DTILE_M=64"], "sm_90a", "nvcc 12.8")
    assert key_a != cache_key([a], [a.parent], ["-DTILE_M=64"], "sm_90a", "nvcc 13.0", ships="cubin")
    (b.parent / "inc" / "tile.cuh").write_text("#define TILE 32\n")
    assert key_a != cache_key([b], [b.parent], ["-DTILE_M=64"], "sm_90a", "nvcc 13.0")


def test_demangle_without_a_tool_keeps_names() -> None:
    assert demangle(["_Z3hogPKfPfi", "plain_c"], None) == {"_Z3hogPKfPfi": "_Z3hogPKfPfi", "plain_c": "plain_c"}


@pytest.mark.skipif(shutil.which("c++filt") is None, reason="c++filt not installed")
def test_demangle_with_cxxfilt() -> None:
    names = demangle(["_Z3hogPKfPfi", "plain_c"], shutil.which("c++filt"))
    assert names == {"_Z3hogPKfPfi": "hog(float const*, float*, int)", "plain_c": "plain_c"}


def test_no_nvcc_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    check = compile_resources([_tree(tmp_path / "t")], [], [], cache_dir=tmp_path / "cache")
    assert check.status == ResourceStatus.no_nvcc
    assert "nvcc not found on PATH" in check.log
    assert check.resources == [] and check.threads == {}


def test_parsed_resources_feed_the_gate() -> None:
    """What review.py will hand to gate.resource_reasons: spills fail, registers x threads is checked."""
    head = parse_ptxas(fixture("nvcc13_sm90a_spill.txt"))
    failures, _ = resource_reasons(head, [], Constraints(), {"_Z3hogPKfPfi": 4096})
    assert any("spills 8696 bytes" in f for f in failures)
    assert any("32 registers x 4096 threads" in f for f in failures)


# -- real nvcc (compile only; nothing runs) -------------------------------------------------------------

CLEAN = """\
__global__ void add_one(float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] += 1.0f;
}
"""

BOUNDED = """\
__global__ void __launch_bounds__(256) scale(float* x, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= a;
}
"""

TUNED = """\
__global__ void __launch_bounds__(BLOCK) tuned(float* x) { x[blockIdx.x * BLOCK + threadIdx.x] *= 2.0f; }
"""

# 128 live floats per thread, each loaded from memory, mixed with neighbours and all stored back, under a
# 32-register cap (1024 threads x 2 blocks per SM): the compiler can fold nothing and must spill.
SPILL = """\
#define N 128
__global__ void __launch_bounds__(1024, 2) hog(const float* __restrict__ in, float* __restrict__ out, int n) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    float v[N];
#pragma unroll
    for (int j = 0; j < N; ++j) v[j] = in[t + j * n];
#pragma unroll
    for (int r = 0; r < 4; ++r) {
#pragma unroll
        for (int j = 0; j < N; ++j) v[j] = v[j] * v[(j + 1) % N] + v[(j + 7) % N];
    }
#pragma unroll
    for (int j = 0; j < N; ++j) out[t + j * n] = v[j];
}
"""


def _kernels(root: Path) -> list[Path]:
    root.mkdir(parents=True, exist_ok=True)
    files = {"clean.cu": CLEAN, "bounded.cu": BOUNDED, "spill.cu": SPILL, "tuned.cu": TUNED}
    for name, text in files.items():
        (root / name).write_text(text)
    (root / "notes.h").write_text("// not compiled, but part of the key\n")
    return [root / name for name in files] + [root / "notes.h"]


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> tuple[ResourceCheck, list[Path], Path]:
    root = tmp_path_factory.mktemp("kernels")
    sources, cache_dir = _kernels(root / "k"), root / "cache"
    return compile_resources(sources, [sources[0].parent], ["-DBLOCK=128"], cache_dir=cache_dir), sources, cache_dir


def _find(check: ResourceCheck, prefix: str) -> resources.Resource:
    [r] = [r for r in check.resources if r.function.startswith(prefix)]
    return r


@pytest.mark.slow
@pytest.mark.untimed
@needs_nvcc
def test_real_compile_clean_kernel(compiled: tuple[ResourceCheck, list[Path], Path]) -> None:
    check = compiled[0]
    assert check.status == ResourceStatus.ok, check.log
    assert not check.cached and check.seconds > 0
    r = _find(check, "add_one(")
    assert r.spill_bytes == 0 and r.registers > 0
    assert len(check.resources) == 4  # one per kernel; notes.h is not compiled


@pytest.mark.slow
@pytest.mark.untimed
@needs_nvcc
def test_real_compile_spills_with_a_demangled_name(compiled: tuple[ResourceCheck, list[Path], Path]) -> None:
    r = _find(compiled[0], "hog(")
    assert r.spill_bytes > 0 and r.spill_bytes == r.spill_store_bytes + r.spill_load_bytes
    assert not r.function.startswith("_Z")
    assert r.registers <= 32


@pytest.mark.slow
@pytest.mark.untimed
@needs_nvcc
def test_real_compile_threads_from_launch_bounds(compiled: tuple[ResourceCheck, list[Path], Path]) -> None:
    threads = compiled[0].threads
    assert threads[_find(compiled[0], "scale(").function] == 256
    assert threads[_find(compiled[0], "tuned(").function] == 128  # -DBLOCK=128 reached the compile
    assert threads[_find(compiled[0], "hog(").function] == 1024
    assert _find(compiled[0], "add_one(").function not in threads


@pytest.mark.slow
@pytest.mark.untimed
@needs_nvcc
def test_real_compile_is_cached(
    compiled: tuple[ResourceCheck, list[Path], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    first, sources, cache_dir = compiled

    def no_compile(*args: object) -> None:
        raise AssertionError("nvcc was invoked for an unchanged tree")

    monkeypatch.setattr(resources, "_compile_one", no_compile)
    again = compile_resources(sources, [sources[0].parent], ["-DBLOCK=128"], cache_dir=cache_dir)
    assert again.cached and again.seconds < 0.5
    assert (again.status, again.resources, again.threads, again.key) == (
        first.status, first.resources, first.threads, first.key,
    )  # fmt: skip


@pytest.mark.slow
@pytest.mark.untimed
@needs_nvcc
def test_real_compile_failure_keeps_the_log(tmp_path: Path) -> None:
    (tmp_path / "bad.cu").write_text("__global__ void bad(float* x) { x[0] = undefined_thing; }\n")
    check = compile_resources([tmp_path / "bad.cu"], [], [], cache_dir=None)
    assert check.status == ResourceStatus.compile_fail
    assert "undefined_thing" in check.log and "bad.cu" in check.log
    assert check.resources == []
    [error] = check.errors  # the first error, as the repository names the file (the folder's own name: "")
    assert (error.kind, error.path, error.line) == ("compiler", "bad.cu", 1)
    assert error.message == 'identifier "undefined_thing" is undefined'


WGMMA = Path(__file__).parent / "fixtures" / "compile_repo" / "ops" / "wgmma_tile"


@pytest.mark.slow
@pytest.mark.untimed
@needs_nvcc
@pytest.mark.parametrize(
    "flags", [[], ["-gencode", "arch=compute_90a,code=sm_90a"]], ids=["no target: default", "the manifest's -gencode"]
)
def test_a_header_only_kernel_with_inline_wgmma_compiles_for_sm_90a(tmp_path: Path, flags: list[str]) -> None:
    """Issue 36, 2: `-arch=sm_90a` also embeds a compute_90 PTX that ptxas rejects (wgmma "not supported on .target
    'sm_90'"); the check compiles sm_90a alone, as `-gencode arch=compute_90a,code=sm_90a` does."""
    unit = WGMMA / "instantiations" / "tile_128.cu"
    check = compile_resources([unit], [], flags, cache_dir=None, folder=WGMMA)
    assert check.status == ResourceStatus.ok, check.log
    [row] = check.resources
    assert row.function == "void wgmma_tile_kernel<128>(float const*, float*, int)"
    assert row.registers > 0 and check.threads == {row.function: 128}


@pytest.mark.slow
@pytest.mark.untimed
@needs_nvcc
def test_an_arch_flag_the_manifest_gives_is_compiled_as_it_ships(tmp_path: Path) -> None:
    """A manifest that says `-arch=sm_90a` ships the compute_90 PTX too: its wgmma fails there, and the error names
    the unit and ptxas' own words."""
    unit = WGMMA / "instantiations" / "tile_128.cu"
    check = compile_resources([unit], [], ["-arch=sm_90a"], cache_dir=None, folder=WGMMA)
    assert check.status == ResourceStatus.compile_fail
    [error] = check.errors
    assert error.path == "instantiations/tile_128.cu"
    assert error.message == "ptxas: Instruction 'wgmma.fence' not supported on .target 'sm_90'"


@pytest.mark.slow
@pytest.mark.untimed
@needs_nvcc
def test_a_kernel_that_ships_a_cubin_is_compiled_to_one() -> None:
    """Issue 54, 9: with DeepGEMM's own JIT flags (`--gpu-architecture=sm_90a`) the object compile fails on the
    compute_90 PTX it embeds; `ships = "cubin"` compiles `-cubin` as the JIT does, and ptxas -v reads the sm_90a
    figures (the kept PTX still gives __launch_bounds__)."""
    from bot.verdict.flags import for_arch

    unit = WGMMA / "instantiations" / "tile_128.cu"
    jit = ["-O3", "-std=c++17", "--gpu-architecture=sm_90a"]
    check = compile_resources([unit], [], for_arch(jit, "sm_90a", "cubin"), cache_dir=None, folder=WGMMA, ships="cubin")
    assert check.status == ResourceStatus.ok, check.log
    [row] = check.resources
    assert row.function == "void wgmma_tile_kernel<128>(float const*, float*, int)"
    assert row.registers > 0 and row.spill_bytes == 0 and check.threads == {row.function: 128}

    shipped = compile_resources([unit], [], for_arch(jit, "sm_90a"), cache_dir=None, folder=WGMMA)
    assert shipped.status == ResourceStatus.compile_fail  # the object compile, as before
    assert shipped.errors[0].message == "ptxas: Instruction 'wgmma.fence' not supported on .target 'sm_90'"


@pytest.mark.slow
@pytest.mark.untimed
@needs_nvcc
def test_a_blackwell_cubin_for_the_family_target_compiles_its_tcgen05(tmp_path: Path) -> None:
    """DeepGEMM on Blackwell with nvcc >= 12.9: `-cubin --gpu-architecture=sm_100f`; the object compile's
    compute_100 PTX rejects tcgen05 ("'tcgen05.fence' not supported on .target 'sm_100'"), the cubin does not."""
    from bot.verdict.flags import for_arch

    unit = tmp_path / "fence.cu"
    unit.write_text(
        "__global__ void fence(float* x) {\n"
        '  asm volatile("tcgen05.fence::before_thread_sync;" ::: "memory");\n'
        "  x[threadIdx.x] = 1.0f;\n}\n"
    )
    jit = ["-O3", "--gpu-architecture=sm_100f"]
    cubin = for_arch(jit, "sm_100f", "cubin")
    check = compile_resources([unit], [], cubin, arch="sm_100f", cache_dir=None, ships="cubin")
    assert check.status == ResourceStatus.ok, check.log
    [row] = check.resources
    assert row.function == "fence(float*)" and row.registers > 0
    shipped = compile_resources([unit], [], for_arch(jit, "sm_100f"), arch="sm_100f", cache_dir=None)
    assert shipped.errors[0].message == "ptxas: Instruction 'tcgen05.fence' not supported on .target 'sm_100'"


def test_the_compile_count_counts_translation_units_not_sides(tmp_path: Path) -> None:
    from bot.untrusted.resources import CompileJob, compile_count

    head, base = tmp_path / "head", tmp_path / "base"
    for side in (head, base):
        side.mkdir()
        for name in ("a.cu", "b.cu"):
            (side / name).write_text("// unit\n")
    assert compile_count([CompileJob(head / "a.cu", head), CompileJob(head / "b.cu", head)]) == "2 .cu file(s)"
    both = [CompileJob(head / "a.cu", head), CompileJob(base / "a.cu", base)]  # a.cu differs: once per side
    assert compile_count(both) == "1 .cu file(s) (2 compiles: head's and base's versions of 1 differ)"


UNIT = """\
#include "unit.cuh"
__global__ void unit_kernel(float* x) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  x[threadIdx.x] = SCALE * x[threadIdx.x];
#else
  x[0] = 2;
#endif
}
"""


LINED = UNIT.replace("x[0] = 2;", "x[0] = __LINE__;")


def _side(root: Path, text: str, header: str = "#define SCALE 3.0f\n") -> resources.CompileJob:
    root.mkdir(parents=True)
    (root / "unit.cu").write_text(text)
    (root / "unit.cuh").write_text(header)
    return resources.CompileJob(root / "unit.cu", root, (), (f"-I{resources.SRC}", "-O3"), ("ops/unit",))


def _keys(tmp_path: Path, head: resources.CompileJob, base: resources.CompileJob) -> dict[str, list[str]]:
    checks = resources.compile_sides({"head": [head], "base": [base]}, arch="sm_90a", cache_dir=tmp_path / "cache")
    assert all(c.status == ResourceStatus.ok for c in checks.values()), checks
    return {side: [u.key for u in c.units if side in u.sides] for side, c in checks.items()}


@pytest.mark.slow
@pytest.mark.untimed
@needs_nvcc
@pytest.mark.parametrize("isolated", [True, False], ids=["the sandbox", "isolation none"])
def test_a_unit_that_differs_only_in_comments_is_compiled_once_for_both_sides(tmp_path: Path, isolated: bool) -> None:
    """Issue 54, 2: a unit is keyed by its text as the compile preprocesses it: comments, the lines they shift and
    trailing blanks leave the key alone, base and head share one compile, and a second check compiles nothing; without
    bubblewrap too, where nvcc sees each checkout's own paths."""
    sandbox = Sandbox.detect() if isolated else Sandbox(Isolation(mode="none", reason=Phrase.as_written("test")), None)
    commented = "// a comment\n/* a block\n   of two lines */\n" + UNIT.replace("x[0] = 2;", "x[0] = 2;   // two")
    head, base = _side(tmp_path / "head", commented), _side(tmp_path / "base", UNIT)
    sides, cache = {"head": [head], "base": [base]}, tmp_path / "cache"
    checks = resources.compile_sides(sides, arch="sm_90a", cache_dir=cache, sandbox=sandbox)
    [unit] = checks["head"].units
    assert (unit.source, unit.sides, unit.cached) == ("ops/unit/unit.cu", ["head", "base"], False)
    assert checks["head"].resources == checks["base"].resources != []
    again = resources.compile_sides(sides, arch="sm_90a", cache_dir=cache, sandbox=sandbox)
    assert [(u.key, u.cached) for u in again["head"].units] == [(unit.key, True)]


@pytest.mark.slow
@pytest.mark.untimed
@needs_nvcc
@pytest.mark.parametrize(
    ("base_text", "head_text", "header"),
    [
        (UNIT, UNIT.replace("SCALE * x", "SCALE + x"), "#define SCALE 3.0f\n"),  # code only the sm_90a pass reads
        (UNIT, UNIT.replace("x[0] = 2;", "x[0] = 5;"), "#define SCALE 3.0f\n"),  # code only the host pass reads
        (UNIT, UNIT, "#define SCALE 4.0f\n"),  # a header's macro
        (LINED, "// a comment that shifts the line the code reads\n" + LINED, "#define SCALE 3.0f\n"),
    ],
    ids=["sm_90a pass", "host pass", "header", "__LINE__"],
)
def test_a_unit_whose_preprocessed_text_differs_is_compiled_for_each_side(
    tmp_path: Path, base_text: str, head_text: str, header: str
) -> None:
    keys = _keys(tmp_path, _side(tmp_path / "head", head_text, header), _side(tmp_path / "base", base_text))
    assert keys["head"] != keys["base"], keys
