"""A unit's cache key (bot/untrusted/unit_keys.py): the preprocessing steps read from nvcc's own listing of the
compile, the text a comment leaves alone, and the slots that bound the compiles to the runner's cores (the keys
themselves, compiled: tests/test_resources.py and tests/test_compile_once.py)."""

from __future__ import annotations

import threading
import time

from bot.untrusted import unit_keys
from bot.untrusted.unit_keys import normalise, preprocess_steps


def test_the_preprocessing_steps_are_the_compiles_own_with_no_line_markers() -> None:
    """`nvcc --dryrun` lists the compile's passes; the key reads each `-E` step as listed, with -P added, and refuses
    what it cannot run exactly (a variable, an output outside the sandbox's folder)."""
    listing = "\n".join(
        [
            "#$ _NVVM_BRANCH_=nvvm",
            '#$ PATH="/usr/bin"',
            '#$ gcc -D__CUDA_ARCH_LIST__=900 -E -x c++ "/opgate/src/a.cu" -o "/opgate/build/a.cpp4.ii" ',
            '#$ cudafe++ --c++17 --gen_c_file_name "/opgate/build/a.cudafe1.cpp"',
            "#$ gcc -D__CUDA_ARCH__=900 -D__CUDA_ARCH_FEAT_SM90_ALL -E -x c++ /opgate/src/a.cu -o /opgate/build/a.ii",
            '#$ "$CICC_PATH/cicc" --c++17 -arch compute_90a',
        ]
    )
    steps = preprocess_steps(listing, "/opgate/build")
    assert steps == [
        (
            [
                "gcc",
                "-D__CUDA_ARCH_LIST__=900",
                "-E",
                "-P",
                "-x",
                "c++",
                "/opgate/src/a.cu",
                "-o",
                "/opgate/build/a.cpp4.ii",
            ],
            "/opgate/build/a.cpp4.ii",
        ),
        (
            [
                "gcc",
                "-D__CUDA_ARCH__=900",
                "-D__CUDA_ARCH_FEAT_SM90_ALL",
                "-E",
                "-P",
                "-x",
                "c++",
                "/opgate/src/a.cu",
                "-o",
                "/opgate/build/a.ii",
            ],
            "/opgate/build/a.ii",
        ),
    ]
    assert preprocess_steps(listing.replace("/opgate/build/a.ii", "/tmp/a.ii"), "/opgate/build") is None
    assert preprocess_steps('#$ gcc -E "$X" -o /opgate/build/a.ii', "/opgate/build") is None
    assert preprocess_steps("#$ cicc -arch compute_90a", "/opgate/build") is None
    assert normalise('# 1 "a.cu"\n\n  int x;   \n#pragma unroll\n') == "int x;\n#pragma unroll"


def test_no_more_compiles_run_at_once_than_the_runner_has_cores() -> None:
    running, most = 0, 0
    lock = threading.Lock()

    def compile_() -> None:
        nonlocal running, most
        with unit_keys.slot():
            with lock:
                running += 1
                most = max(most, running)
            time.sleep(0.05)
            with lock:
                running -= 1

    threads = [threading.Thread(target=compile_) for _ in range(unit_keys.cores() + 3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert most == unit_keys.cores()
