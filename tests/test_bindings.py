"""What a kernel's sources register with torch (bot/config/bindings.py): TORCH_LIBRARY ops with their schemas,
pybind11 functions, and the line that names a misspelt entry point before anything is built."""

from __future__ import annotations

from pathlib import Path

from bot.config.bindings import Argument, Bindings, entry_problem, parse_schema, scan, scan_text

LIBRARY = """
// TORCH_LIBRARY(commented, out) { m.def("ghost(Tensor a) -> Tensor"); }
TORCH_LIBRARY(extension_cpp, m) {
  m.def("mymuladd(Tensor a, Tensor b, float c) -> Tensor");
  m.def("myadd_out(Tensor a, Tensor b, Tensor(a!) out, int[] dims, int? n=None) -> ()");
}
TORCH_LIBRARY_IMPL(extension_cpp, CPU, m) { m.impl("mymuladd", &mymuladd_cpu); }
"""
PYBIND = 'PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {\n  m.def("gemm", &gemm);\n  m.def("gemm_tiled", &g);\n}\n'


def test_a_schema_gives_the_ops_name_its_arguments_and_what_it_returns():
    name, arguments, returns = parse_schema("myadd_out(Tensor a, Tensor(a!) out, int[] dims, int? n=None) -> ()")
    assert (name, returns) == ("myadd_out", "()")
    assert arguments == (Argument("a", "Tensor"), Argument("out", "Tensor", mutable=True), Argument("dims", "int[]"),
                         Argument("n", "int?"))  # fmt: skip
    assert [a.scalar for a in arguments] == [None, None, None, "int"] and arguments[1].tensor
    assert [a.mutable for a in arguments] == [False, True, False, False]  # `Tensor(a!)`: the op writes it
    assert parse_schema("not a schema") is None


def test_the_ops_of_a_library_block_its_dispatch_keys_and_pybind_functions_are_found_and_comments_are_not():
    found = Bindings()
    scan_text("ops.cpp", LIBRARY, found)
    scan_text("bind.cpp", PYBIND, found)
    assert [o.entry for o in found.ops] == ["torch.ops.extension_cpp.mymuladd", "torch.ops.extension_cpp.myadd_out"]
    assert found.impls == {"extension_cpp": ["CPU"]} and found.libraries == {"ops.cpp": ["extension_cpp"]}
    assert found.pybind == {"bind.cpp": ["gemm", "gemm_tiled"]}
    assert found.binding_sources == {"ops.cpp", "bind.cpp"}
    assert found.op("torch.ops.extension_cpp.mymuladd.default") is found.ops[0]
    assert found.op("torch.ops.extension_cpp.ghost") is None


def test_a_misspelt_entry_names_the_nearest_one_and_a_plain_name_for_an_op_says_how_to_call_it(tmp_path: Path):
    (tmp_path / "ops.cpp").write_text(LIBRARY)
    ops = scan(tmp_path, ["ops.cpp", "missing.cpp"])
    assert entry_problem("torch.ops.extension_cpp.mymuladd", ops, "cuda") is None
    assert entry_problem("torch.ops.extension_cpp.mymuladd.default", ops, "cuda") is None
    assert entry_problem("torch.ops.extension_cpp.mymulad", ops, "cuda") == (
        "cuda entry = 'torch.ops.extension_cpp.mymulad': no such op or function in its sources; "
        "did you mean 'torch.ops.extension_cpp.mymuladd'?"
    )
    plain = entry_problem("mymuladd", ops, "cpu")
    assert plain is not None and plain.startswith("cpu entry = 'mymuladd': the sources register TORCH_LIBRARY ops")
    assert "call one as entry = 'torch.ops.extension_cpp.mymuladd'" in plain
    bound = Bindings()
    scan_text("bind.cpp", PYBIND, bound)
    assert entry_problem("gemm", bound, "cpu") is None
    assert entry_problem("gemm_tile", bound, "cpu") == (
        "cpu entry = 'gemm_tile': no such op or function in its sources; did you mean 'gemm_tiled'?"
    )
    assert entry_problem("anything", Bindings(), "cpu") is None  # nothing registered: nothing to check against
