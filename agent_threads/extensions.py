"""Python extensions: modules whose `register(api)` adds lifecycle hooks, context
transforms, slash commands and system-hook triggers to a thread.

A module is named by a path (relative to the hook file) or a dotted name. Loading problems
are `ExtensionError`s that say FILE:LINE; an extension that raises while the thread runs is
reported in the transcript and the thread goes on.

Extensions run in the daemon, so only code a person chose may run: when a person starts a
process (or asks), each extension is pinned to the SHA-256 of its file (`PATH#sha256=HEX`).
A file changed since, by a thread's Write tool for instance, is refused with a clear error;
the new version takes effect for the next process a person starts.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import sys
import traceback
import types
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, overload

from agent_threads.api import AgentEvent, HookBuilder, LifecycleHook, Message
from agent_threads.hooks.system import Trigger
from supervise.errors import SuperviseError


class ExtensionError(SuperviseError):
    """An extension cannot be loaded, or used a part of the API wrongly."""

    exit_code = 2


Transform = Callable[[list[Message], "ExtensionContext"], Any]
CommandHandler = Callable[[str, "ExtensionContext"], Any]


@dataclass
class Command:
    name: str
    description: str
    handler: CommandHandler
    source: str


class HeadlessUI:
    """`ctx.ui` in a thread run by the daemon: no person at a terminal.

    `select` takes the `--choice N` given to `supervise send`, else fails with a message that
    says how to give one; `notify` goes to the transcript.
    """

    def __init__(self, choice: int | None, notes: list[str]) -> None:
        self.choice = choice
        self.notes = notes

    def select(self, title: str, options: Sequence[str]) -> str:
        listing = "; ".join(f"{i}) {o}" for i, o in enumerate(options, 1))
        if self.choice is None:
            raise ExtensionError(
                f"{title} needs a choice and this thread has no terminal: run "
                f"`supervise send ID '/COMMAND' --choice N` (options: {listing})"
            )
        if not 1 <= self.choice <= len(options):
            raise ExtensionError(f"--choice {self.choice} is out of range (options: {listing})")
        return options[self.choice - 1]

    def confirm(self, title: str) -> bool:
        if self.choice is None:
            raise ExtensionError(f"{title}: confirm with --choice 1 (yes) or --choice 2 (no)")
        return self.choice == 1

    def input(self, title: str) -> str:
        raise ExtensionError(f"{title}: this thread has no terminal; pass the text as arguments")

    def notify(self, message: str) -> None:
        self.notes.append(message)


@dataclass
class ExtensionContext:
    """The context every extension callback gets (the document's unified context)."""

    cwd: Path
    model: str
    entries: list[dict[str, Any]]
    messages: list[Message]
    ui: HeadlessUI
    save_entry: Callable[[str, dict[str, Any]], Awaitable[None]]
    rebuild_context: Callable[[], Awaitable[list[Message]]]
    exec: Callable[[str], Awaitable[tuple[int, str]]]
    has_ui: bool = False


@dataclass
class Extensions:
    """Everything the loaded extensions registered, in load order."""

    lifecycle: list[LifecycleHook] = field(default_factory=list)
    transforms: list[tuple[Transform, str]] = field(default_factory=list)
    commands: dict[str, Command] = field(default_factory=dict)
    triggers: list[Trigger] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    specs: list[str] = field(default_factory=list)  # as given, pins included: inherited


class ExtensionAPI:
    """What `register(api)` receives."""

    def __init__(self, into: Extensions, source: str) -> None:
        self._into = into
        self._source = source

    @overload
    def on(self, event: AgentEvent) -> HookBuilder: ...

    @overload
    def on(self, event: Literal["context"], handler: Transform) -> None: ...

    @overload
    def on(self, event: Literal["system_hook"], handler: Trigger) -> None: ...

    def on(
        self, event: AgentEvent | Literal["context", "system_hook"], handler: Any = None
    ) -> HookBuilder | None:
        """`on(AgentEvent.X)` gives a hook builder; `on("context", fn)` adds a context
        transform; `on("system_hook", fn)` a system-hook trigger `(tool_name, result) ->
        message | None`. The overloads give each form its exact type.
        """
        if isinstance(event, AgentEvent):
            return HookBuilder(event, self._into.lifecycle, self._source)
        if event == "context" and callable(handler):
            self._into.transforms.append((handler, self._source))
            return None
        if event == "system_hook" and callable(handler):
            self._into.triggers.append(handler)
            return None
        raise ExtensionError(
            f"{self._source}: api.on({event!r}) is not an event: use an AgentEvent, "
            "'context' or 'system_hook' (the last two with a handler)"
        )

    def command(self, name: str, description: str = "", handler: Any = None) -> None:
        """Add `/name`, run by `supervise send ID "/name args"`."""
        name = name.lstrip("/")
        if not name.isidentifier() or not callable(handler):
            raise ExtensionError(f"{self._source}: command needs a name and a handler")
        self._into.commands[name] = Command(name, description, handler, self._source)


PIN = "#sha256="


def is_path(spec_text: str) -> bool:
    """A file extension (`x.py`, `dir/x`), not a dotted module name."""
    return spec_text.endswith(".py") or "/" in spec_text


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def module_file(name: str) -> Path | None:
    """The file a dotted module name imports from, without importing it (None: unknown)."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    origin = getattr(spec, "origin", None)
    return Path(origin) if origin and origin not in ("built-in", "frozen") else None


def pin(spec_text: str, file: Path | None) -> str:
    """`spec_text` pinned to the current content of its file (unchanged if unreadable)."""
    if file is None or PIN in spec_text:
        return spec_text
    try:
        return f"{spec_text}{PIN}{digest(file.read_bytes())}"
    except OSError:
        return spec_text  # loading will say what is wrong with it


def _changed(what: str, want: str, got: str) -> ExtensionError:
    return ExtensionError(
        f"{what}: changed since a person started this process (pinned sha256 {want[:12]}, now "
        f"{got[:12]}): extension code written afterwards, by a thread for instance, never "
        "runs. Start the process again (`supervise run`) to use this version"
    )


def _load_module(spec_text: str, base: Path) -> tuple[Any, str]:
    spec_text, _, want = spec_text.partition(PIN)
    if is_path(spec_text):
        path = Path(spec_text).expanduser()
        path = path if path.is_absolute() else base / path
        try:
            data = path.read_bytes()
        except OSError:
            raise ExtensionError(
                f"extension {spec_text}: no such file {path}; check agent.extensions"
            ) from None
        if want and (got := digest(data)) != want:
            raise _changed(str(path), want, got)
        # Run the bytes just checked, not the file again: it could change in between.
        name = "supervise_ext_" + hashlib.sha1(str(path).encode()).hexdigest()[:12]
        try:
            code = compile(data, str(path), "exec")
        except SyntaxError as exc:
            raise ExtensionError(
                f"{path}:{exc.lineno}: syntax error in extension: {exc.msg}"
            ) from None
        module = types.ModuleType(name)
        module.__file__ = str(path)
        sys.modules[name] = module  # dataclasses and pickling look modules up by name
        try:
            exec(code, module.__dict__)
        except Exception as exc:
            raise ExtensionError(
                f"{path}:{_line(exc, path)}: extension failed to load: {exc!r}"
            ) from None
        return module, str(path)
    if want and (file := module_file(spec_text)) is not None:
        try:
            got = digest(file.read_bytes())
        except OSError:
            got = "unreadable"
        if got != want:
            raise _changed(f"extension {spec_text} ({file})", want, got)
    try:
        return importlib.import_module(spec_text), spec_text
    except Exception as exc:
        raise ExtensionError(f"extension {spec_text}: cannot import it: {exc!r}") from None


def check_syntax(path: Path) -> None:
    """Raise ExtensionError with FILE:LINE if the file is not valid Python."""
    try:
        compile(path.read_bytes(), str(path), "exec")
    except SyntaxError as exc:
        raise ExtensionError(f"{path}:{exc.lineno}: syntax error in extension: {exc.msg}") from None
    except OSError as exc:
        raise ExtensionError(f"{path}: cannot read extension: {exc.strerror}") from None


def _line(exc: BaseException, path: Path) -> int:
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        if frame.filename == str(path):
            return frame.lineno or 1
    return 1


def load_extensions(specs: Sequence[str], base: Path) -> Extensions:
    """Import each extension and call its `register(api)`, in order.

    Raises:
        ExtensionError: naming the file (and line) at fault.
    """
    out = Extensions()
    for spec_text in specs:
        module, source = _load_module(str(spec_text), base)
        out.specs.append(str(spec_text))
        register = getattr(module, "register", None)
        if not callable(register):
            raise ExtensionError(f"{source}: an extension must define register(api)")
        try:
            register(ExtensionAPI(out, source))
        except ExtensionError:
            raise
        except Exception as exc:
            raise ExtensionError(
                f"{source}:{_line(exc, Path(source))}: register(api) failed: {exc!r}"
            ) from None
        out.sources.append(source)
    return out


async def call(fn: Callable[..., Any], *args: Any) -> Any:
    """Call a sync or async extension callback."""
    result = fn(*args)
    if inspect.isawaitable(result):
        result = await result
    return result
