"""The Jinja templates (PR comment, replies, summary, prompts, dashboard, `opgate init`), shipped as bot.templates,
and the one way an environment over them is set up."""

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import jinja2

TEMPLATES = Path(__file__).resolve().parent  # this folder, wherever the package is installed


def environment(
    folder: Path,
    *,
    autoescape: bool = False,
    keep_trailing_newline: bool = True,
    extensions: Sequence[str] = (),
    finalize: Callable[..., Any] | None = None,
) -> jinja2.Environment:
    """The one way opgate reads a folder of its templates: a name the context lacks is an error (StrictUndefined),
    and a block tag's line leaves no blank line behind (trim_blocks, lstrip_blocks). Its users differ only in the
    parameters: the comment renderer's catalog and `comment_safe`, the dashboard's HTML escaping."""
    return jinja2.Environment(
        extensions=list(extensions),
        loader=jinja2.FileSystemLoader(folder),
        undefined=jinja2.StrictUndefined,
        autoescape=autoescape,
        keep_trailing_newline=keep_trailing_newline,
        trim_blocks=True,
        lstrip_blocks=True,
        finalize=finalize,
    )
