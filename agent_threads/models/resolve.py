"""Which model a thread gets, and building it from `provider:name`.

The choice, first found wins: the thread's own (`ask --model`, `thread retry --model`),
the hook file's `agent.model`, `SUPERVISE_MODEL` as the CLI saw it when the process
started, the daemon's `SUPERVISE_MODEL`, the settings file's `model`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from agent_threads.messages import Model
from supervise.errors import ModelError

NO_MODEL = "no model configured: set agent.model in the hook file or SUPERVISE_MODEL"


def choose(*candidates: str | None) -> str | None:
    """The first configured model name."""
    for c in candidates:
        if c and c.strip():
            return c.strip()
    return None


def build_model(name: str, env: Mapping[str, str], *, cwd: Path, stream: bool = True) -> Model:
    """The model named `provider:model`; a relative scripted path resolves against `cwd`.

    Raises:
        ModelError: unknown provider, unreadable script, missing key for a public API.
    """
    provider, _, model = name.partition(":")
    if provider == "scripted" and model:
        from agent_threads.models.scripted import ScriptedModel

        path = Path(model).expanduser()
        return ScriptedModel.load(path if path.is_absolute() else cwd / path)
    if provider == "openai" and model:
        from agent_threads.models.openai import OpenAIModel

        return OpenAIModel.from_env(model, env, stream)
    if provider == "anthropic" and model:
        from agent_threads.models.anthropic import AnthropicModel

        return AnthropicModel.from_env(model, env, stream)
    raise ModelError(
        f"unknown model {name!r}: use openai:NAME, anthropic:NAME or scripted:FILE; "
        "fix agent.model or SUPERVISE_MODEL"
    )
