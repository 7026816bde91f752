"""bot/review/cases.py through `opgate review`: a CPU build that base and head fail alike leaves the kernel
undecided, naming the header and the #include that asked for it, and its cases not run (never a fail)."""

from __future__ import annotations

import pytest

from tests.compile_repo import make_compile_repo, prepend, review

BODY = "ops/scale_cpu/scale.cpp"


@pytest.mark.slow
@pytest.mark.untimed
def test_a_cpu_build_base_fails_alike_is_undecided_naming_the_missing_header(opgate, tmp_path):
    repo = make_compile_repo(tmp_path / "repo")
    prepend(repo, BODY, "// Reworded: one multiply-add per element.\n")
    run = review(opgate, repo, repo.commit("a comment"))
    assert run.code == 0, run.stdout + run.stderr
    kernel = run.kernel("scale_cpu")
    assert (kernel["build"]["ok"], kernel["base_build"]["ok"]) == (False, False)
    assert kernel["verdict"] == "undecided" and kernel["reasons"] == []
    assert kernel["undecided"][0] == (
        "build (cpu): not decided, base fails alike (the runner or the manifest, not the change): "
        f"{BODY}:5: #include of simd/config.h, which the compiler cannot find; if simd/config.h is a header of the "
        "repository, add the folder that holds it to include_dirs in kernel.toml (a submodule not checked out leaves "
        "that folder empty); if a library's, install it on the runner"
    )
    [case] = kernel["cases"]
    assert (case["verdict"], case["reasons"]) == ("skipped", ["base and head fail to build alike"])
    headline = run.comment.split("### ")[0]
    assert "undecided" in headline and "simd/config.h" in headline and "/opgate/" not in headline


@pytest.mark.slow
@pytest.mark.untimed
def test_a_cpu_build_error_only_head_has_fails_naming_its_file_and_line(opgate, tmp_path):
    repo = make_compile_repo(tmp_path / "repo")
    repo.write("ops/scale_cpu/simd/config.h", "#pragma once\n")  # base builds once its header is there
    repo.base = repo.commit("the SIMD header")
    repo.edit(BODY, "y[i] = x[i] * w[i] + b[i];", "y[i] = x[i] * w[i] + b[i]")
    run = review(opgate, repo, repo.commit("a typo"))
    assert run.code == 1, run.stdout + run.stderr
    kernel = run.kernel("scale_cpu")
    assert kernel["verdict"] == "fail" and kernel["base_build"]["ok"]
    [reason] = kernel["reasons"]
    assert reason.startswith(f"build (cpu): head does not compile: {BODY}:7: expected "), reason
    assert "before" in reason and "token" in reason  # g++'s words (its quotes follow the locale)
