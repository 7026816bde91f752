"""Inside the sandbox: the callable a case calls, loaded from a side's build (for worker.py and costrun.py alike).

Bound into the sandbox beside them and imported as `entry`; like them it imports nothing of opgate. An entry
`torch.ops.NS.OP[.OVERLOAD]` names an op the library registers (TORCH_LIBRARY); any other names a function of the
built pybind module.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
from typing import Any

TORCH_OPS = "torch.ops."  # an entry naming a registered op


def _load_extension(path: str, module: str) -> Any:
    loader = importlib.machinery.ExtensionFileLoader(module, path)
    spec = importlib.util.spec_from_file_location(module, path, loader=loader)
    assert spec is not None
    ext = importlib.util.module_from_spec(spec)
    loader.exec_module(ext)
    return ext


def load_entry(path: str, module: str, entry: str) -> Any:
    """The callable a case calls: `torch.ops.NS.OP[.OVERLOAD]` from the library (its TORCH_LIBRARY registrations),
    or a function of the built pybind module."""
    import torch

    if entry.startswith(TORCH_OPS):
        torch.ops.load_library(path)
        target: Any = torch.ops
        for part in entry.removeprefix(TORCH_OPS).split("."):
            try:
                target = getattr(target, part)
            except (AttributeError, RuntimeError):
                raise AttributeError(f"the built library registers no op {entry} (entry in kernel.toml)") from None
        return target
    try:
        ext = _load_extension(path, module)
    except ImportError as exc:
        if f"PyInit_{module}" not in str(exc):
            raise
        raise ImportError(
            f"the built library is no Python module {module} (it defines no PyInit_{module}); a TORCH_LIBRARY op "
            'is called as entry = "torch.ops.NAMESPACE.OP" in kernel.toml'
        ) from None
    if not hasattr(ext, entry):
        raise AttributeError(f"the built module has no function {entry!r} (entry in kernel.toml)")
    return getattr(ext, entry)
