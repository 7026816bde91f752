"""One module per `opgate` subcommand: each exposes `register(subparsers)` and `run(args, settings)`."""
