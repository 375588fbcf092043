"""The one interface through which agent code runs: Python (validate_code), shell (terminal), SQL helpers.

Agent code is untrusted. Backends decide how strongly it is isolated; every backend honours the same
contract:
- a fresh per-episode workspace that is the code's working directory and HOME;
- the paths in ``SandboxSpec.readonly_paths`` are readable at the same absolute path, and the paths in
  ``SandboxSpec.hidden_paths`` (gold answers, labels, reference solutions) are not readable where the
  backend can hide them (``describe()`` says which protections are active);
- an allow-listed environment: no API key or credential reaches agent code;
- ``ExecResult.answer`` carries repr() of the variable ``answer`` after Python code ran, with numpy and
  pandas values first turned into plain Python (``.item()`` / ``.tolist()``) so graders can
  ``ast.literal_eval`` it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path

from medagentgym.types import ExecResult


@dataclass
class SandboxSpec:
    """What one episode's task needs from the sandbox."""

    readonly_paths: list[Path] = field(default_factory=list)
    hidden_paths: list[Path] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    # host:port pairs the code may reach even with the network off (e.g. a task's local FHIR server).
    allow_hosts: list[str] = field(default_factory=list)
    python: str | None = None


class Sandbox(ABC):
    """One episode's sandbox. Use as a context manager; ``close()`` removes the workspace."""

    workspace: Path

    @abstractmethod
    def run_python(self, code: str, timeout: float | None = None) -> ExecResult: ...

    @abstractmethod
    def run_shell(self, command: str, timeout: float | None = None) -> ExecResult: ...

    @abstractmethod
    def describe(self) -> str:
        """One line for the run log: backend name and the protections that are active."""

    @abstractmethod
    def close(self) -> None: ...

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
