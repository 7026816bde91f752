"""A small safe arithmetic language for kernel.toml launch descriptions: integers, names, + - * / //, min, max."""

from __future__ import annotations

import ast
from collections.abc import Mapping

MAX_LENGTH = 1000  # characters in one expression: ast.parse of untrusted text stays small
MAX_MAGNITUDE = 2**62  # every intermediate value; chained names cannot build huge integers
FUNCTIONS = ("min", "max")

_BINARY: tuple[type[ast.operator], ...] = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv)


class ExprError(ValueError):
    """An expression outside the allowed language, or one that cannot be evaluated (no location)."""


_NAMES = {
    ast.Pow: "the power operator **",
    ast.Mod: "the operator %",
    ast.Compare: "a comparison",
    ast.BoolOp: "and/or",
    ast.IfExp: "a conditional (x if c else y)",
    ast.Attribute: "attribute access",
    ast.Subscript: "indexing",
    ast.Lambda: "a lambda",
}


def _describe(node: ast.AST) -> str:
    if isinstance(node, ast.Constant):
        return f"the constant {node.value!r}"
    if isinstance(node, ast.BinOp | ast.UnaryOp):
        return _NAMES.get(type(node.op), f"the operator {type(node.op).__name__}")
    if isinstance(node, ast.Call):
        return "a call of anything but min() or max() with two or more arguments"
    return _NAMES.get(type(node), type(node).__name__)


def parse(text: str) -> ast.expr:
    """The expression's syntax tree, after checking that every node is in the allow-list."""
    if len(text) > MAX_LENGTH:
        raise ExprError(f"longer than {MAX_LENGTH} characters")
    try:
        tree = ast.parse(text.strip(), mode="eval").body
        _check(tree)
    except (SyntaxError, ValueError, MemoryError) as exc:
        if isinstance(exc, ExprError):
            raise
        raise ExprError(f"not an arithmetic expression ({type(exc).__name__})") from None
    except RecursionError:
        raise ExprError("nested too deeply") from None
    return tree


def _check(node: ast.AST) -> None:
    """Recursively: each node is an int constant, a name, + - * / //, unary +/-, or min/max of 2+ arguments."""
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return
    if isinstance(node, ast.Name) and node.id not in FUNCTIONS:
        return
    if isinstance(node, ast.BinOp) and isinstance(node.op, _BINARY):
        _check(node.left)
        _check(node.right)
        return
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        _check(node.operand)
        return
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in FUNCTIONS
        and len(node.args) >= 2
        and not node.keywords
    ):
        for arg in node.args:
            _check(arg)
        return
    raise ExprError(f"{_describe(node)} is not allowed (only integers, names, + - * / //, min, max)")


def names(tree: ast.expr) -> set[str]:
    """Every variable the expression reads (function names excluded)."""
    called = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and id(n) not in called}


def _bounded(value: int) -> int:
    if abs(value) > MAX_MAGNITUDE:
        raise ExprError(f"a value exceeds {MAX_MAGNITUDE:,} in magnitude")
    return value


def evaluate(tree: ast.expr, env: Mapping[str, int]) -> int:
    """The integer value of a checked tree; `/` must divide exactly, `//` rounds toward minus infinity."""
    if isinstance(tree, ast.Constant) and isinstance(tree.value, int):
        return _bounded(tree.value)
    if isinstance(tree, ast.Name):
        if tree.id not in env:
            raise ExprError(f"unknown name {tree.id!r}")
        return env[tree.id]
    if isinstance(tree, ast.UnaryOp):
        value = evaluate(tree.operand, env)
        return -value if isinstance(tree.op, ast.USub) else value
    if isinstance(tree, ast.Call):
        values = [evaluate(a, env) for a in tree.args]
        assert isinstance(tree.func, ast.Name)
        return min(values) if tree.func.id == "min" else max(values)
    if isinstance(tree, ast.BinOp):
        left, right = evaluate(tree.left, env), evaluate(tree.right, env)
        if isinstance(tree.op, ast.Add):
            return _bounded(left + right)
        if isinstance(tree.op, ast.Sub):
            return _bounded(left - right)
        if isinstance(tree.op, ast.Mult):
            return _bounded(left * right)
        if right == 0:
            raise ExprError("division by zero")
        if isinstance(tree.op, ast.FloorDiv):
            return left // right
        if left % right:
            raise ExprError(f"{left} / {right} is not a whole number (use // to round down)")
        return left // right
    raise ExprError(f"{_describe(tree)} is not allowed")  # parse() never lets one through


def check(text: str, known: set[str]) -> ast.expr:
    """Parse `text` and require every name it reads to be in `known` (ExprError otherwise)."""
    tree = parse(text)
    if unknown := sorted(names(tree) - known):
        raise ExprError(f"unknown name {unknown[0]!r} (known: {', '.join(sorted(known)) or 'none'})")
    return tree


def value(text: int | str, env: Mapping[str, int]) -> int:
    """A number as it is, or an expression evaluated over `env` (ExprError otherwise)."""
    return text if isinstance(text, int) else evaluate(parse(text), env)
