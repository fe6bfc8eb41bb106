"""The tables the CLI and the daemon share.

Times are seconds since the epoch (float, UTC). Output positions are byte offsets into
the process's output.log; `log_archived` counts bytes rotated out of it, so a position in
the whole output is `log_archived + offset`.
"""

from __future__ import annotations

from typing import Literal

from sqlalchemy import UniqueConstraint
from sqlmodel import Field, SQLModel

SCHEMA_VERSION = 4

ProcessState = Literal["starting", "running", "exited", "lost"]
ThreadStatus = Literal["queued", "running", "waiting_approval", "completed", "failed", "cancelled"]


class Meta(SQLModel, table=True):
    """Key/value facts about the store itself (schema version)."""

    key: str = Field(primary_key=True)
    value: str


class ProcessRow(SQLModel, table=True):
    __tablename__ = "process"

    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(index=True)
    command: str  # shell-quoted argv, for people
    argv: str  # JSON list
    cwd: str
    state: str = Field(default="starting", index=True)
    pid: int | None = None  # the child's pid (also its process group and session)
    pid_started: float | None = None  # psutil create_time of the child: pids are reused
    shim_pid: int | None = None
    shim_started: float | None = None
    boot_id: str = ""
    exit_code: int | None = None
    signal: str | None = None
    result: str | None = None  # success | exit-code | signal | lost, as systemd says
    end_reason: str | None = None  # why a lost process was given up (e.g. "run dir deleted")
    started_at: float = 0.0
    # CLOCK_BOOTTIME at started_at, in boot `boot_id`: timeouts count on it (clocks.py).
    started_boot: float | None = None
    ended_at: float | None = None
    depth: int = 0
    parent_thread_id: int | None = None
    # Tailing bookkeeping, committed together with the fires it produced.
    log_offset: int = 0
    log_inode: int | None = None
    log_head: str | None = None
    log_skipping: bool = False
    log_archived: int = 0
    log_punched: int = 0  # output.log's head up to here was freed (copied to output.log.1)
    # The file output.log names once the child's own file was renamed away (logrotate's
    # `create`): read from its start, its position saved like the child's file's.
    log_new_offset: int = 0
    log_new_inode: int | None = None
    log_new_head: str | None = None
    log_new_skipping: bool = False
    # Added in schema 4. What its threads run under (hooks, permissions, shell hooks,
    # extension pins) as launched: spec.json is a copy for people, and a tool could write it.
    spec: str | None = None
    # The Fernet key that opens runs/N/env.json, the environment it was launched with: the
    # values (maybe secrets) are in neither file in clear, and a changed env.json fails to
    # open. Its threads' tools get that environment.
    env_key: str | None = None


class HookCounter(SQLModel, table=True):
    """How often one hook of one process has fired; exhausted once max_spawns is used up."""

    __tablename__ = "hook_counter"

    process_id: int = Field(primary_key=True, foreign_key="process.id")
    hook: str = Field(primary_key=True)
    fires: int = 0
    refused: int = 0


class FireRow(SQLModel, table=True):
    """Every time a hook fired, also when a limit refused it (`spawned` false, `reason`)."""

    __tablename__ = "fire"

    id: int | None = Field(default=None, primary_key=True)
    key: str = Field(unique=True)  # what makes a fire unique: a crash never repeats one
    process_id: int = Field(index=True, foreign_key="process.id")
    hook: str
    trigger: str
    at: float
    detail: str  # the matched line, the exit, the timeout
    exit_code: int | None = None
    spawned: bool = False
    reason: str | None = None
    thread_id: int | None = None


class ThreadRow(SQLModel, table=True):
    """An agent execution thread: what started it, where it stands, what it may do.

    Its transcript is the `entry` rows; `status` is the one place its state lives.
    """

    __tablename__ = "thread"

    id: int | None = Field(default=None, primary_key=True)
    process_id: int | None = Field(default=None, index=True)
    hook: str | None = None
    trigger: str
    depth: int
    status: str = Field(default="queued", index=True)
    created_at: float
    # The shared rate limiter's start time (equals created_at when free); indexed: every new
    # thread looks up the latest starts.
    not_before: float = Field(index=True)
    prompt: str
    fire_id: int | None = None
    # Added in schema 2 (the agent loop).
    model: str | None = None  # chosen for this thread (ask --model, thread retry --model)
    cwd: str | None = None  # user threads: where their tools run
    permissions: str | None = None  # user threads: JSON profile (list of layers)
    error: str | None = None  # why it failed or was cancelled
    waiting: str | None = None  # waiting_approval: the tool call it wants to make
    # Model calls since the last start (send, retry); a SQL default: fires insert in plain SQL.
    turns: int = Field(default=0, sa_column_kwargs={"server_default": "0"})
    segment_started_at: float | None = None  # start of the current run: wall-clock budget
    ended_at: float | None = None
    parent_thread_id: int | None = None
    # Added in schema 3: user threads' shell hooks (JSON list), from --settings.
    hooks: str | None = None


class EntryRow(SQLModel, table=True):
    """One saved step of a thread's transcript; `seq` orders them within the thread."""

    __tablename__ = "entry"
    __table_args__ = (UniqueConstraint("thread_id", "seq"),)

    id: int | None = Field(default=None, primary_key=True)
    thread_id: int = Field(index=True, foreign_key="thread.id")
    seq: int
    kind: str  # user | assistant | tool_start | tool_result | approval | note
    at: float
    data: str  # JSON object
