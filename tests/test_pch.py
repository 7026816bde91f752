"""The precompiled torch header (bot/untrusted/pch.py): which binding uses it, its key, and real builds with and
without it — the extension built with it passes its case, and each build's log says which header it used or why
none."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bot.config.manifest import load_kernel
from bot.errors import InputError
from bot.untrusted import build as build_module
from bot.untrusted import pch
from bot.untrusted.build import build
from bot.untrusted.sandbox import Sandbox
from bot.untrusted.toolchain import toolchain
from tests.conftest import CHECK_REPO, check_repo

KERNEL = "ops/vec_scale"
OWN = ["-I/opgate/src"]
FLAGS = ["-fPIC", "-std=c++20", "-O2", "-DTORCH_EXTENSION_NAME=opgate_ext", "-I/opgate/src"]
BINDING = b'// the binding\n/* of a kernel */\n#include <torch/extension.h>\n#include "k.h"\n'


@pytest.fixture(scope="module")
def tc(tmp_path_factory: pytest.TempPathFactory):
    tc = toolchain("cpu", tmp_path_factory.mktemp("toolchain"))
    if "g++" not in Path(tc.cxx).name and "gcc" not in Path(tc.cxx).name:
        pytest.skip(f"the compiler {tc.cxx} is not GCC")
    return tc


def test_a_binding_uses_the_header_its_first_include_names_after_comments(tc, tmp_path):
    header = pch.plan(BINDING, False, FLAGS, OWN, ["-O2"], [tmp_path], tc)
    assert isinstance(header, pch.Header)
    assert header.name == "torch/extension.h" and header.gch == "torch/extension.h.gch"
    assert "-I/opgate/src" not in header.flags and "-O2" in header.flags  # built without the kernel's folders
    for name in ("torch/all.h", "torch/python.h"):
        text = f"#include <{name}>\n#include <torch/extension.h>\n".encode()
        assert isinstance(pch.plan(text, False, FLAGS, OWN, [], [tmp_path], tc), pch.Header)


def test_a_binding_that_includes_something_else_first_or_is_nvccs_goes_without_and_says_why(tc, tmp_path):
    first = pch.plan(b"#include <vector>\n#include <torch/extension.h>\n", False, FLAGS, OWN, [], [tmp_path], tc)
    assert first == "its first include is <vector>, not one of torch/extension.h, torch/all.h, torch/python.h"
    code_first = pch.plan(b"int x;\n#include <torch/extension.h>\n", False, FLAGS, OWN, [], [tmp_path], tc)
    assert isinstance(code_first, str) and "not an #include" in code_first
    assert "nvcc" in str(pch.plan(BINDING, True, FLAGS, OWN, [], [tmp_path], tc))


def test_a_binding_whose_flags_put_a_header_first_or_whose_folder_shadows_torch_goes_without(tc, tmp_path):
    forced = pch.plan(BINDING, False, [*FLAGS, "-include", "cstdint"], OWN, ["-O2", "-include", "cstdint"],
                      [tmp_path], tc)  # fmt: skip
    assert forced == "its flags differ from the header's: -include puts a header or folder before <torch/extension.h>"
    (tmp_path / "c10").mkdir()
    shadowed = pch.plan(BINDING, False, FLAGS, OWN, ["-O2"], [tmp_path], tc)
    assert shadowed == f"{tmp_path.name}/c10 would shadow a header that <torch/extension.h> includes"


def test_the_header_key_changes_with_the_flags_the_header_and_the_toolchain(tc, tmp_path):
    def key(flags: list[str], text: bytes = BINDING, t=tc) -> str:
        header = pch.plan(text, False, flags, OWN, [], [tmp_path], t)
        assert isinstance(header, pch.Header)
        return header.key

    base = key(FLAGS)
    assert key(FLAGS) == base
    # the kernel's own folders never reach the key (the header is built without them)
    assert pch.header_flags([*FLAGS, "-I/opgate/inc/0"], [*OWN, "-I/opgate/inc/0"]) == pch.header_flags(FLAGS, OWN)
    assert key([f if f != "-O2" else "-O3" for f in FLAGS]) != base
    assert key([*FLAGS, "-DNDEBUG"]) != base
    assert key(FLAGS, b"#include <torch/all.h>\n") != base
    assert key(FLAGS, t=tc.model_copy(update={"key": "another toolchain"})) != base


def test_gccs_refusal_is_read_from_its_invalid_pch_warning():
    output = (
        "[1/2] c++ ...\n/opgate/pch/0/torch/extension.h.gch: not used because `__OPTIMIZE__' not defined "
        "[-Winvalid-pch]\n[2/2] link\n"
    )
    assert pch.refusals(output) == [
        "/opgate/pch/0/torch/extension.h.gch: not used because `__OPTIMIZE__' not defined [-Winvalid-pch]"
    ]
    assert pch.refusals("[1/1] link\n") == []


def test_opgate_pch_names_when_the_header_is_compiled_and_refuses_anything_else(monkeypatch):
    monkeypatch.delenv("OPGATE_PCH", raising=False)
    assert pch.mode() == "second"
    for value, want in (("first", "first"), ("stored", "stored"), (" OFF ", "off"), ("", "second")):
        monkeypatch.setenv("OPGATE_PCH", value)
        assert pch.mode() == want
    monkeypatch.setenv("OPGATE_PCH", "always")
    with pytest.raises(InputError, match=r"OPGATE_PCH='always': expected one of second, first, stored, off"):
        pch.mode()


@pytest.mark.parametrize(("mode", "compiled"), [("second", False), ("first", True), ("stored", False), ("off", False)])
def test_on_an_empty_store_opgate_pch_decides_whether_the_first_binding_compiles_the_header(
    tc, tmp_path, monkeypatch, mode, compiled
):
    monkeypatch.setenv("OPGATE_PCH", mode)
    kernel = load_kernel(CHECK_REPO / KERNEL, path=KERNEL)
    spec = kernel.manifest.build["cpu"]
    units = build_module._keyed_units(kernel.folder, spec, kernel.config, "cpu", tc, [])
    flags = {u.key: build_module.unit_flags(u, spec, kernel.config, tc) for u in units}
    root, work = tmp_path / "build", tmp_path / "work"
    planned = build_module._precompile(units, set(), flags, kernel.folder, spec, [], tc, root, work)
    assert [Path(out).name for out, _, _ in planned.edges] == (["extension.h.gch"] if compiled else [])
    assert (work / "pch" / "0" / "torch" / "extension.h").is_file() == compiled  # the stub beside the .gch
    assert any("-Winvalid-pch" in f for f in flags.values()) == compiled
    assert [m.name for m in root.glob("pch/*/wanted")] == (["wanted"] if mode == "second" else [])
    if mode == "off":
        assert planned.notes == ["opgate: bindings are compiled without a precompiled header: OPGATE_PCH=off"]
    if mode == "stored":
        assert re.fullmatch(r"opgate: binding_cpu\.cpp is compiled without a precompiled header: <torch/extension\.h> "
                            r"[0-9a-f]{12} is not in the build store \(OPGATE_PCH=stored never compiles one\)",
                            planned.notes[0]), planned.notes  # fmt: skip


@pytest.mark.parametrize("mode", ["second", "first", "stored", "off"])
def test_a_header_in_the_store_is_bound_into_the_build_in_every_mode_but_off(tc, tmp_path, monkeypatch, mode):
    monkeypatch.setenv("OPGATE_PCH", mode)
    kernel = load_kernel(CHECK_REPO / KERNEL, path=KERNEL)
    spec = kernel.manifest.build["cpu"]
    units = build_module._keyed_units(kernel.folder, spec, kernel.config, "cpu", tc, [])
    flags = {u.key: build_module.unit_flags(u, spec, kernel.config, tc) for u in units}
    [binding] = [u for u in units if u.binding]
    header = pch.plan((kernel.folder / binding.source).read_bytes(), False, flags[binding.key], OWN, spec.cflags,
                      [kernel.folder], tc)  # fmt: skip
    assert isinstance(header, pch.Header)
    root = tmp_path / "build"
    (tmp_path / "made.gch").write_bytes(b"a header the sandbox compiled")
    build_module._store(tmp_path / "made.gch", root / "pch" / header.key / header.gch, 1.0)
    planned = build_module._precompile(units, set(), flags, kernel.folder, spec, [], tc, root, tmp_path / "work")
    assert planned.binds == ([] if mode == "off" else [(str(root / "pch" / header.key), f"{pch.PCH}/0")])
    assert planned.edges == []  # never compiled again
    assert ("-I/opgate/pch/0" in flags[binding.key]) == (mode != "off")


# -- real builds ------------------------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.untimed
def test_an_extension_built_with_the_precompiled_header_passes_its_case_and_its_log_says_so(
    tc, opgate, tmp_path, monkeypatch
):
    monkeypatch.setenv("OPGATE_PCH", "second")  # the runner's default (the tests' is off)
    repo = check_repo(tmp_path)
    kernel = load_kernel(repo / KERNEL, path=KERNEL)
    spec = kernel.manifest.build["cpu"]
    root = tmp_path.parent / f"{tmp_path.name}-build"
    binding = kernel.folder / "binding_cpu.cpp"
    first = build("vec_scale", kernel.folder, spec, kernel.config, "cpu", root, Sandbox.detect())
    assert first.ok, first.log_tail  # the first binding of these flags: compiled as before, the header only wanted
    assert re.search(r"^opgate: binding_cpu\.cpp is compiled without a precompiled header: the first binding of "
                     r"these flags \(the next one compiles <torch/extension\.h> [0-9a-f]{12}\)$", first.log_tail,
                     re.M), first.log_tail  # fmt: skip
    binding.write_text(binding.read_text() + "// edited once\n")
    second = build("vec_scale", kernel.folder, spec, kernel.config, "cpu", root, Sandbox.detect())
    assert second.ok and second.compiled == ["binding_cpu.cpp"], second.log_tail
    assert re.search(r"^opgate: binding_cpu\.cpp uses the precompiled <torch/extension\.h> [0-9a-f]{12} "
                     r"\(compiled in this build\)$", second.log_tail, re.M), second.log_tail  # fmt: skip
    assert "GCC did not use" not in second.log_tail and ".gch: not used because" not in second.log_tail
    [stored] = (root / "pch").iterdir()
    assert (stored / "torch" / "extension.h.gch").is_file() and (stored / "torch" / "extension.h").is_file()
    # The case runs on that very extension: opgate check finds it in the same store.
    run = opgate("check", env={"OPGATE_BUILD_DIR": str(root)})
    assert "  ok  cpu_1000 (the smallest): entry and reference agree, max_abs_err 0 ≤ 1e-06" in run.stdout, run.stdout
    assert re.search(r"  ok  build cpu: cached", run.stdout), run.stdout
    # A third binding of the same flags takes the header from the store.
    binding.write_text(binding.read_text() + "// edited twice\n")
    third = build("vec_scale", kernel.folder, spec, kernel.config, "cpu", root, Sandbox.detect())
    assert third.ok and third.compiled == ["binding_cpu.cpp"], third.log_tail
    assert f"uses the precompiled <torch/extension.h> {stored.name[:12]} (from the build store)" in third.log_tail


@pytest.mark.slow
@pytest.mark.untimed
def test_a_binding_whose_flags_differ_builds_without_the_header_and_its_log_says_why(tc, tmp_path, monkeypatch):
    monkeypatch.setenv("OPGATE_PCH", "second")
    repo = check_repo(tmp_path)
    kernel = load_kernel(repo / KERNEL, path=KERNEL)
    spec = kernel.manifest.build["cpu"]
    spec = spec.model_copy(update={"cflags": [*spec.cflags, "-include", "cstdint"]})
    root = tmp_path.parent / f"{tmp_path.name}-build"
    built = build("vec_scale", kernel.folder, spec, kernel.config, "cpu", root, Sandbox.detect())
    assert built.ok, built.log_tail
    assert (
        "opgate: binding_cpu.cpp is compiled without a precompiled header: its flags differ from the header's: "
        "-include puts a header or folder before <torch/extension.h>"
    ) in built.log_tail.splitlines()
    assert not (root / "pch").exists()
