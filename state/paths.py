"""The layout of supervise's state directory (where it is: the `home` setting, resolved
in state/settings.py: `$SUPERVISE_HOME`, else `$XDG_STATE_HOME/supervise`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from state.trust import check_state_dir
from supervise.errors import StateDirError


@dataclass(frozen=True)
class StatePaths:
    """The layout of one state directory."""

    home: Path

    @property
    def db(self) -> Path:
        return self.home / "state.db"

    @property
    def runs(self) -> Path:
        return self.home / "runs"

    @property
    def daemon_pid(self) -> Path:
        return self.home / "daemon.pid"

    @property
    def daemon_log(self) -> Path:
        return self.home / "daemon.log"

    @property
    def wake(self) -> Path:
        """Written by the CLI when it queued work for the daemon's thread runner."""
        return self.home / "wake"

    def run_dir(self, process_id: int) -> Path:
        return self.runs / str(process_id)

    def thread_dir(self, thread_id: int) -> Path:
        """A thread's files for its shell hooks: transcript.jsonl, env.sh (created on use)."""
        return self.home / "threads" / f"t{thread_id}"

    def ensure(self) -> StatePaths:
        """Create the state directory (0700) and its runs/ folder, and check that they are
        safely ours and writable (see `state.trust`).

        Raises:
            StateDirError: when the directory cannot be created, belongs to someone else, is
                open to others, has a symbolic link for runs/ or state.db, or is read-only.
        """
        try:
            self.home.mkdir(mode=0o700, parents=True, exist_ok=True)
            if not self.runs.is_symlink():  # judged below: never create through a link
                self.runs.mkdir(mode=0o700, exist_ok=True)
        except OSError as exc:
            if self.home.is_dir():
                check_state_dir(self.home, self.runs, self.db)  # says why, e.g. read-only
            raise StateDirError(
                f"{exc.filename or self.home}: cannot create the state directory: "
                f"{exc.strerror}; set SUPERVISE_HOME to a writable directory"
            ) from exc
        check_state_dir(self.home, self.runs, self.db)
        # mkdir's mode is masked by the umask and ignored for existing dirs: a home others
        # may only read (a plain `mkdir`, 0755) is made private; one they may write is
        # refused above.
        if self.home.stat().st_mode & 0o077:
            self.home.chmod(0o700)
        return self
