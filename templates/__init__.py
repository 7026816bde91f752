"""The Jinja templates (PR comment, replies, summary, prompts, dashboard, `opgate init`), shipped as bot.templates."""

from pathlib import Path

TEMPLATES = Path(__file__).resolve().parent  # this folder, wherever the package is installed
