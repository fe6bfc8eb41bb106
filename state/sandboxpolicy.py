"""What a hook file or the settings file asks of the tools' sandbox: a pure record.

Here, not in agent_threads.sandbox, because the settings (state) parse it and state imports
nothing above it; and `ps`, which reads the settings, should not import subprocess to do so.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

MODES = ("off", "auto", "required")  # from least to most strict
EXAMPLE = "write sandbox: {mode: auto, network: true, write: [/extra/dir]} or sandbox: off"


class SandboxConfigError(ValueError):
    """A bad `sandbox` value; `key` is the sub-key at fault ("" for the value itself)."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key = key


@dataclass(frozen=True)
class SandboxPolicy:
    """What the hook file or settings ask for.

    `network` None means "not said": on, unless a parent thread turned it off. `write` holds
    absolute directories (or `~/...`) writable besides the working directory.
    """

    mode: str = "auto"
    network: bool | None = None
    write: tuple[str, ...] = ()

    @property
    def network_on(self) -> bool:
        return self.network is not False

    @classmethod
    def parse(cls, value: Any) -> SandboxPolicy:
        """`off` / `auto` / `required`, or a mapping with mode, network and write.

        Raises:
            SandboxConfigError: naming the sub-key and how to fix it.
        """
        if value is None:
            return cls()
        if isinstance(value, bool):  # YAML reads a bare `off` as false
            return cls(mode="auto" if value else "off")
        if isinstance(value, str):
            return cls(mode=_mode(value))
        if not isinstance(value, Mapping):
            raise SandboxConfigError("", f"must be off, auto, required or a mapping; {EXAMPLE}")
        unknown = sorted(str(k) for k in value if k not in ("mode", "network", "write"))
        if unknown:
            raise SandboxConfigError(
                unknown[0], "is not a sandbox setting; the settings are mode, network, write"
            )
        raw_mode = value.get("mode", "auto")
        mode = "off" if raw_mode is False else _mode(raw_mode, key="mode")
        network = value.get("network")
        if network is not None and not isinstance(network, bool):
            raise SandboxConfigError(
                "network", f"must be true or false, got {network!r}; write network: false"
            )
        write = value.get("write") or []
        if not isinstance(write, list | tuple) or not all(isinstance(w, str) for w in write):
            raise SandboxConfigError("write", "must be a list of directories; write: [/data/out]")
        for w in write:
            if not (w.startswith(("/", "~/")) or w == "~"):
                raise SandboxConfigError(
                    "write", f"must hold absolute paths, got {w!r}; write it from / (or ~/)"
                )
        return cls(mode=mode, network=network, write=tuple(write))

    def to_json(self) -> dict[str, Any]:
        return {"mode": self.mode, "network": self.network, "write": list(self.write)}

    def text(self) -> str:
        """What `hooks check` prints: `mode=auto network=on write=/a,/b`."""
        write = ",".join(self.write) or "-"
        return f"mode={self.mode} network={'on' if self.network_on else 'off'} write={write}"

    @classmethod
    def from_json(cls, data: Any) -> SandboxPolicy | None:
        if not data:
            return None
        return cls.parse(data)

    def over(self, default: SandboxPolicy) -> SandboxPolicy:
        """This policy with what it leaves unsaid taken from `default` (e.g. the settings)."""
        network = default.network if self.network is None else self.network
        return SandboxPolicy(self.mode, network, self.write or default.write)

    def within(self, parent: SandboxPolicy | None) -> SandboxPolicy:
        """What a sub-agent gets: its own policy, never looser than its parent thread's.

        Mode is the stricter one, network stays off once off, and only directories both
        allow writing stay writable.
        """
        if parent is None:
            return self
        mode = max(self.mode, parent.mode, key=MODES.index)
        network = False if parent.network is False else self.network
        write = self.write if self.write else parent.write
        write = tuple(w for w in write if w in parent.write)
        return SandboxPolicy(mode, network, write)


def _mode(value: Any, key: str = "") -> str:
    text = str(value).strip().lower() if isinstance(value, str) else value
    if text in MODES:
        return str(text)
    raise SandboxConfigError(key, f"must be off, auto or required, got {value!r}; {EXAMPLE}")
