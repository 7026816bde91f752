"""`python -m bot` runs the opgate CLI."""

from bot.cli import main

raise SystemExit(main())
