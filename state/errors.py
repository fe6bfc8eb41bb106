"""The one exception tree of supervise.

`SuperviseError` is the root. `main()` maps each to an exit code and prints its message
without a traceback; anything outside this tree is our bug and keeps its traceback.
"""

from __future__ import annotations


class SuperviseError(Exception):
    """Root of every error supervise reports to a person."""

    exit_code = 1


class UserError(SuperviseError):
    """Bad input or usage: the message says what, where, and how to fix it (exit 2)."""

    exit_code = 2


class HookFileError(UserError):
    """A hook file is invalid; carries every problem found, each with FILE:LINE."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = list(problems)
        super().__init__("\n".join(self.problems))


class StateError(SuperviseError):
    """The state directory or database cannot be used (corrupt, locked, too new)."""

    exit_code = 2


class LaunchError(SuperviseError):
    """A process could not be started."""


class HookError(SuperviseError):
    """A hook could not be carried out at run time."""


class DaemonRunning(SuperviseError):
    """Another daemon already owns this state directory."""

    exit_code = 1


class ModelError(SuperviseError):
    """A model provider failed in a way retrying will not fix (bad request, bad reply)."""


class ModelAuthError(ModelError):
    """The provider refused our credentials; the message names the variable to set."""


class TransientModelError(ModelError):
    """429, 5xx, a reset connection or a timeout: worth retrying with backoff.

    Attributes:
        retry_after: seconds the server asked us to wait, when it said.
    """

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class ThreadStopped(SuperviseError):
    """A thread's run ends early: cancelled by a person while it was running."""
