"""The one exception tree of supervise, below every package (supervisor, agent_threads and
state all import it; it imports none of them).

Two roots, apart on purpose:
- `SuperviseError`: a failure a person is told about. `main()` prints its message without a
  traceback and exits with its `exit_code`: 2 for bad input or usage (`UserError`), 1 for a
  failure at run time (a locked or full database, a launch that failed, a model that
  refused). Anything outside this tree is our bug and keeps its traceback.
- `Signal`: control flow, not failure. It ends a step early on purpose (a person cancelled
  the thread; a tool's error is to go back to the model) and is always caught inside
  supervise; it never reaches `main()`.
"""

from __future__ import annotations

from typing import Any


class SuperviseError(Exception):
    """Root of every failure supervise reports to a person (exit 1 unless said otherwise)."""

    exit_code = 1


# -- bad input or usage (exit 2) -------------------------------------------------------------


class UserError(SuperviseError):
    """Bad input or usage: the message says what, where, and how to fix it (exit 2)."""

    exit_code = 2


class SettingError(UserError):
    """A setting has a bad value; the message names the variable, or the file and key."""


class HookFileError(UserError):
    """A hook file is invalid; carries every problem found, each with FILE:LINE."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = list(problems)
        super().__init__("\n".join(self.problems))


class StateDirError(UserError):
    """The state directory chosen (SUPERVISE_HOME) is not safely ours, or not writable."""


# -- failures at run time (exit 1) -----------------------------------------------------------


class StateError(SuperviseError):
    """The state database cannot be used now: unreadable, full, too new, or a row vanished."""


class DatabaseLocked(StateError):
    """Another writer held the database past the timeout; retrying later may work."""


class LaunchError(SuperviseError):
    """A process could not be started."""


class HookError(SuperviseError):
    """A hook could not be carried out at run time."""


class DaemonRunning(SuperviseError):
    """Another daemon already owns this state directory."""


class ModelError(SuperviseError):
    """A model provider failed in a way retrying will not fix (bad request, bad reply)."""


class ModelAuthError(ModelError):
    """The provider refused our credentials; the message names the variable to set."""


class ModelTruncated(ModelError):
    """The reply was cut off at the output limit and more room did not help (or none can be
    asked for): half an answer is not an answer."""


class ModelRefused(ModelError):
    """The model refused, or the provider's filter stopped the reply; the same request will be
    refused again."""


class TransientModelError(ModelError):
    """429, 5xx, a reset connection or a timeout: worth retrying with backoff.

    Attributes:
        retry_after: seconds the server asked us to wait, when it said.
    """

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


# -- control flow, never shown as a failure --------------------------------------------------


class Signal(Exception):
    """Ends a step early on purpose; caught inside supervise, never reaches `main()`."""


class ThreadStopped(Signal):
    """A thread's run ends early: a person cancelled it while it was running."""


class MessagesArrived(Signal):
    """Messages were saved to a running thread (a repeat of its failure, see a hook's
    `dedup:`) after what its model last saw: its reply is not saved, and the model is asked
    again with them. `entries` are the new entries (the journal fills them in)."""

    def __init__(self, message: str, entries: list[Any] | None = None) -> None:
        super().__init__(message)
        self.entries = list(entries or [])
