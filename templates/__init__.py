"""The Jinja templates (PR comment, replies, summary, prompts, dashboard, `opgate init`), shipped as bot.templates."""
