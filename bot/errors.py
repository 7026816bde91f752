"""The small tree of opgate's own exceptions; the CLI maps them to exit codes."""


class OpgateError(Exception):
    """Base of every error opgate raises on purpose."""

    exit_code = 2


class InputError(OpgateError):
    """Bad input or configuration: a manifest, a revision, an event file, a setting (exit 2)."""

    exit_code = 2


class ServiceError(OpgateError):
    """An outside service (gateway, GitHub) failed after retries (exit 3)."""

    exit_code = 3


class GitError(InputError):
    """A git command failed, usually an unknown revision or a path that is not a repository."""


class BuildError(OpgateError):
    """A kernel failed to build; carries the compiler log for the report."""

    def __init__(self, message: str, log: str = "") -> None:
        super().__init__(message)
        self.log = log
