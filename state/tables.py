"""The tables, declared once in SQLAlchemy Core; the same schema on SQLite and PostgreSQL.

Core, not SQLModel classes: `ps` and `fires` must answer in well under 300 ms at 1,000
processes, and importing SQLModel (with the ORM and pydantic) alone takes 0.3 s where
SQLAlchemy's Core takes half of that. The record types the rest of the code sees are the frozen
dataclasses of `state.processes`, `state.threads` and their siblings.

Times are seconds since the epoch (float, UTC). Output positions are byte offsets into the
process's output.log; `log_archived` counts bytes rotated out of it, so a position in the
whole output is `log_archived + offset`. Names and types match the schema that SQLModel created
up to schema 4, so a state.db written by an older supervise opens as it is.
"""

from __future__ import annotations

from sqlalchemy import (
    Boolean,
    Column,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    UniqueConstraint,
)

metadata = MetaData()

meta = Table(
    "meta",
    metadata,
    Column("key", String, primary_key=True),
    Column("value", String, nullable=False),
)

process = Table(
    "process",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("name", String, nullable=False, index=True),
    Column("command", String, nullable=False),  # shell-quoted argv, for people
    Column("argv", String, nullable=False),  # JSON list
    Column("cwd", String, nullable=False),
    Column("state", String, nullable=False, index=True, default="starting"),
    Column("pid", Integer),  # the child's pid (also its process group and session)
    Column("pid_started", Float),  # psutil create_time of the child: pids are reused
    Column("shim_pid", Integer),
    Column("shim_started", Float),
    Column("boot_id", String, nullable=False, default=""),
    Column("exit_code", Integer),
    Column("signal", String),
    Column("result", String),  # success | exit-code | signal | lost, as systemd says
    Column("end_reason", String),  # why a lost process was given up
    Column("started_at", Float, nullable=False, default=0.0),
    Column("started_boot", Float),  # CLOCK_BOOTTIME at started_at: timeouts count on it
    Column("ended_at", Float),
    Column("depth", Integer, nullable=False, default=0),
    Column("parent_thread_id", Integer),
    # Tailing bookkeeping, committed together with the fires it produced.
    Column("log_offset", Integer, nullable=False, default=0),
    Column("log_inode", Integer),
    Column("log_head", String),
    Column("log_skipping", Boolean, nullable=False, default=False),
    Column("log_archived", Integer, nullable=False, default=0),
    Column("log_punched", Integer, nullable=False, default=0),
    # The file output.log names once the child's own file was renamed away (logrotate).
    Column("log_new_offset", Integer, nullable=False, default=0),
    Column("log_new_inode", Integer),
    Column("log_new_head", String),
    Column("log_new_skipping", Boolean, nullable=False, default=False),
    # Schema 4: the launch record its threads run under (runs/N/spec.json is a copy), and
    # the Fernet key that opens runs/N/env.json.
    Column("spec", String),
    Column("env_key", String),
    # Schema 6: restarts. Each run of a restarted process is its own row (its own output,
    # exit record and fires), linked to the chain's first run: `first_id` (its own id for a
    # first run), `run_no` (1, 2, ...; unique within the chain), `cause` (run | restart |
    # manual | boot: who started it; boot: the daemon, after a reboot ended the run
    # before). A run the restart policy decided on waits as `backoff` until `due_at` (and,
    # with `after_thread`, until the previous run's on_exit threads are done).
    # `stop_request` is what a person asked of a run (stop | restart): the exit's commit
    # reads it to decide what comes next.
    Column("first_id", Integer),
    Column("run_no", Integer, nullable=False, default=1),
    Column("cause", String, nullable=False, default="run"),
    Column("due_at", Float),
    Column("after_thread", Boolean, nullable=False, default=False),
    Column("stop_request", String),
)
# Two writers cannot both record run N of one process: the exactly-once of restarts.
run_index = Index("ux_process_run", process.c.first_id, process.c.run_no, unique=True)

hook_counter = Table(
    "hook_counter",
    metadata,
    Column("process_id", Integer, ForeignKey("process.id"), primary_key=True),
    Column("hook", String, primary_key=True),
    Column("fires", Integer, nullable=False, default=0),
    Column("refused", Integer, nullable=False, default=0),
)

fire = Table(
    "fire",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("key", String, nullable=False, unique=True),  # a crash never repeats a fire
    Column("process_id", Integer, ForeignKey("process.id"), nullable=False, index=True),
    Column("hook", String, nullable=False),
    Column("trigger", String, nullable=False),
    Column("at", Float, nullable=False),
    Column("detail", String, nullable=False),  # the matched line, the exit, the timeout
    Column("exit_code", Integer),
    Column("spawned", Boolean, nullable=False, default=False),
    Column("reason", String),
    Column("thread_id", Integer),
)

thread = Table(
    "thread",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("process_id", Integer, index=True),
    Column("hook", String),
    Column("trigger", String, nullable=False),
    Column("depth", Integer, nullable=False),
    Column("status", String, nullable=False, index=True, default="queued"),
    Column("created_at", Float, nullable=False),
    # The shared rate limiter's start time; indexed: every new thread looks up the latest.
    Column("not_before", Float, nullable=False, index=True),
    Column("prompt", String, nullable=False),
    Column("fire_id", Integer),
    Column("model", String),
    Column("cwd", String),  # user threads: where their tools run
    Column("permissions", String),  # user threads: JSON profile (list of layers)
    Column("error", String),  # why it failed or was cancelled
    Column("waiting", String),  # waiting_approval: the tool call it wants to make
    Column("turns", Integer, nullable=False, default=0, server_default="0"),
    Column("segment_started_at", Float),  # start of the current run: wall-clock budget
    Column("ended_at", Float),
    Column("parent_thread_id", Integer),
    Column("hooks", String),  # user threads' shell hooks (JSON list), from --settings
    # Schema 10: the dedup key of the fire that started it (a hook's `dedup:`): a repeat of
    # that failure on the same process joins it while it is open (supervisor/dedup.py).
    Column("dedup_key", String),
)
thread_dedup_index = Index("ix_thread_dedup_key", thread.c.dedup_key)

entry = Table(
    "entry",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("thread_id", Integer, ForeignKey("thread.id"), nullable=False, index=True),
    Column("seq", Integer, nullable=False),
    Column("kind", String, nullable=False),
    Column("at", Float, nullable=False),
    Column("data", String, nullable=False),  # JSON object
    UniqueConstraint("thread_id", "seq"),
)

# Schema 8: the outbox of hook actions and notifications. A row is written in the
# transaction that records its cause (a fire, a thread's end or approval wait, a crash
# loop) and done afterwards by the daemon, so a SIGKILL between the two loses nothing.
action = Table(
    "action",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("fire_id", Integer, index=True),  # the fire that made it, if one did
    Column("thread_id", Integer),
    Column("process_id", Integer),
    Column("event", String, nullable=False),  # fire | approval | thread_finished | crash_loop
    Column("action", String, nullable=False),  # notify | run | restart
    Column("target", String),  # notify: the target's name in the settings file
    Column("title", String, nullable=False, default=""),
    Column("body", String, nullable=False, default=""),
    Column("data", String),  # JSON: the facts a `run:` command gets, and the command
    # pending -> done | failed; `running` while a `run:` command runs (at most once).
    Column("status", String, nullable=False, index=True, default="pending"),
    Column("attempts", Integer, nullable=False, default=0),
    Column("last_error", String),
    Column("next_at", Float, nullable=False, default=0.0),
    Column("created_at", Float, nullable=False),
    Column("done_at", Float),
    Column("result", String),  # run: exit status and output tail; notify: how it went
    Column("batch", Integer),  # notify: the action whose message carried this one
)
