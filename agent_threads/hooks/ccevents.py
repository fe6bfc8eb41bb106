"""Claude Code's hook events, as its hooks reference defines them, and what each means here.

Every event the reference defines is known: a settings file written for Claude Code is
accepted whole. An event either fires in a thread (with Claude Code's input fields and
decision semantics where the event has a meaning in a headless thread) or never fires, and
`hooks check` says why. Pure data.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class EventInfo:
    name: str
    fires: bool
    # The input field a group's `matcher` filters on; None: the event takes no matcher (a
    # matcher written there is ignored, as in Claude Code).
    matcher_field: str | None
    # When it fires here, or why it never does.
    note: str


_TOOL = "tool_name"

EVENT_TABLE: tuple[EventInfo, ...] = (
    EventInfo(
        "SessionStart",
        True,
        "source",
        "once when a thread starts (source startup), again when a daemon restart resumes it "
        "(source resume); plain stdout and additionalContext reach the model",
    ),
    EventInfo("UserPromptSubmit", True, None, "for every prompt that enters the thread"),
    EventInfo("PreToolUse", True, _TOOL, "before each tool call, after the permission rules"),
    EventInfo(
        "PermissionRequest",
        True,
        _TOOL,
        "when a call needs a person's approval; its decision answers the approval",
    ),
    EventInfo("PostToolUse", True, _TOOL, "after a tool call succeeds"),
    EventInfo("PostToolUseFailure", True, _TOOL, "after a tool call fails"),
    EventInfo(
        "Notification",
        True,
        "notification_type",
        "permission_prompt when a thread waits for approval; agent_completed when it ends",
    ),
    EventInfo(
        "Stop",
        True,
        None,
        "when a thread gives its final answer; block sends the model back to work",
    ),
    EventInfo(
        "SubagentStop",
        True,
        "agent_type",
        "instead of Stop, for a thread started by another thread's process",
    ),
    EventInfo("StopFailure", True, "error", "when a thread fails because the model API failed"),
    EventInfo("SessionEnd", True, "reason", "when a thread ends (reason other)"),
    EventInfo("PostToolBatch", False, None, "not yet: tool calls run one at a time here"),
    EventInfo("PreCompact", False, "trigger", "threads never compact their context"),
    EventInfo("PostCompact", False, "trigger", "threads never compact their context"),
    EventInfo("Setup", False, "trigger", "there is no --init or --maintenance run"),
    EventInfo("InstructionsLoaded", False, "load_reason", "threads load no CLAUDE.md files"),
    EventInfo("UserPromptExpansion", False, "command_name", "threads have no slash commands"),
    EventInfo("MessageDisplay", False, None, "nothing is displayed while a thread runs"),
    EventInfo("PermissionDenied", False, _TOOL, "there is no auto mode classifier here"),
    EventInfo("SubagentStart", False, "agent_type", "threads have no Agent tool"),
    EventInfo("TaskCreated", False, None, "threads have no task tools"),
    EventInfo("TaskCompleted", False, None, "threads have no task tools"),
    EventInfo("TeammateIdle", False, None, "threads have no agent teams"),
    EventInfo("ConfigChange", False, "source", "settings are read once, when a run starts"),
    EventInfo("CwdChanged", False, None, "a thread's working directory never changes"),
    EventInfo("DirectoryAdded", False, "source", "threads have no /add-dir"),
    EventInfo("FileChanged", False, None, "threads watch no files"),
    EventInfo("WorktreeCreate", False, None, "threads create no worktrees"),
    EventInfo("WorktreeRemove", False, None, "threads create no worktrees"),
    EventInfo("Elicitation", False, "mcp_server_name", "threads use no MCP servers"),
    EventInfo("ElicitationResult", False, "mcp_server_name", "threads use no MCP servers"),
)

EVENTS: dict[str, EventInfo] = {e.name: e for e in EVENT_TABLE}
FIRING = tuple(e.name for e in EVENT_TABLE if e.fires)
TOOL_EVENTS = frozenset(e.name for e in EVENT_TABLE if e.matcher_field == _TOOL)
# The events whose `if` field is evaluated; on any other event a hook with `if` never runs.
IF_EVENTS = TOOL_EVENTS
# Where plain stdout on exit 0 is added to the context (elsewhere it only goes to the record).
STDOUT_IS_CONTEXT = frozenset({"SessionStart", "UserPromptSubmit"})

# Handler fields of Claude Code's shape; those not used here are accepted with a warning.
HANDLER_FIELDS_USED = ("type", "command", "args", "timeout", "if", "async", "asyncRewake")
HANDLER_FIELDS_IGNORED = {
    "statusMessage": "nothing is displayed while a hook runs",
    "once": "honoured only in skill frontmatter, which threads do not load",
    "shell": "hooks always run with /bin/sh",
}
# Handler types other than command: accepted, listed by `hooks check`, never run.
OTHER_HANDLER_TYPES = {
    "http": "HTTP hooks are not run here; use a command hook with curl",
    "mcp_tool": "threads use no MCP servers",
    "prompt": "prompt hooks are not run here",
    "agent": "agent hooks are not run here",
}
