"""`scripted:FILE`: a deterministic model that replays a YAML list of turns.

```yaml
turns:
  - tool_calls: [{name: Bash, arguments: {command: "tail -n 20 $SUPERVISE_OUTPUT"}}]
  - content: "Diagnosis: the migration fails on a missing column."
```

Turn N answers the model call that has N earlier replies in the conversation, so a thread
resumed after a crash gets the same turn again. After the last turn it answers with no
text and no tool calls, which ends the thread.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from agent_threads.messages import AssistantMessage, Message, Reply, ToolCall, ToolSpec, Usage
from supervise.errors import ModelError

_TURN_KEYS = {"content", "tool_calls", "usage"}


@dataclass(frozen=True)
class ScriptedModel:
    path: Path
    turns: tuple[Reply, ...]

    @property
    def name(self) -> str:
        return f"scripted:{self.path}"

    @classmethod
    def load(cls, path: Path) -> ScriptedModel:
        """Read and check a script.

        Raises:
            ModelError: the file is missing or malformed, with FILE and the turn at fault.
        """
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise ModelError(
                f"scripted model: cannot read {path}: {exc.strerror}; check agent.model"
            ) from exc
        except yaml.YAMLError as exc:
            raise ModelError(f"scripted model: {path} is not valid YAML: {exc}") from exc
        # `turns: [...]`, or the list itself (the README calls it "a YAML list of turns").
        turns = data.get("turns") if isinstance(data, dict) else data
        if not isinstance(turns, list):
            raise ModelError(
                f"scripted model: {path} must hold `turns:`, a list of "
                "{content: ..., tool_calls: [{name, arguments}]}"
            )
        return cls(path, tuple(_turn(path, i, t) for i, t in enumerate(turns, 1)))

    async def complete(
        self, system: str, messages: Sequence[Message], tools: Sequence[ToolSpec]
    ) -> Reply:
        index = sum(1 for m in messages if isinstance(m, AssistantMessage))
        if index >= len(self.turns):
            return Reply(stop_reason="end_of_script")
        return self.turns[index]


def _turn(path: Path, n: int, raw: Any) -> Reply:
    where = f"scripted model: {path}: turn {n}"
    if not isinstance(raw, dict) or not raw or set(raw) - _TURN_KEYS:
        raise ModelError(f"{where} must be a mapping with content and/or tool_calls, got {raw!r}")
    calls = []
    for i, c in enumerate(raw.get("tool_calls") or [], 1):
        if not isinstance(c, dict) or not isinstance(c.get("name"), str):
            raise ModelError(f"{where}: tool call {i} needs a name, e.g. {{name: Bash, ...}}")
        args = c.get("arguments") or {}
        if not isinstance(args, dict):
            raise ModelError(f"{where}: tool call {i}: arguments must be a mapping")
        # Stable ids: a resumed thread must see the same call ids it saved.
        digest = hashlib.sha1(f"{n}:{i}".encode()).hexdigest()[:12]
        calls.append(ToolCall(f"call_{digest}", c["name"], args))
    usage = raw.get("usage")
    return Reply(
        content=str(raw.get("content") or ""),
        tool_calls=tuple(calls),
        usage=Usage(int(usage[0]), int(usage[1])) if isinstance(usage, list) else None,
        stop_reason="tool_use" if calls else "end_turn",
    )
