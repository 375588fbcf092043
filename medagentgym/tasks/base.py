"""The Task interface: one subclass per dataset owns loading, prompt, permitted actions, data and grading.

A task config names its implementation as ``impl: "medagentgym.tasks.<module>:<Class>"``; nothing else
needs registering. Adding a dataset is one module, one YAML, one sample generator, one golden-case test.
"""

from __future__ import annotations

import importlib
import json
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, ClassVar

from medagentgym.config import TaskConfig
from medagentgym.errors import DataMissingError, TaskFileError
from medagentgym.sandbox.base import Sandbox, SandboxSpec
from medagentgym.types import ExecResult, TaskInstance, Verdict


class Task(ABC):
    """One dataset. Instances are created once per run and shared by every episode (keep them stateless
    per episode: per-episode state lives in ``setup_episode``'s return value or the sandbox)."""

    name: ClassVar[str]
    # File of each split, relative to the task's data dir (the original release's names).
    split_files: ClassVar[dict[str, str]] = {"test": "test_tasks.jsonl", "train": "train_tasks.jsonl"}
    # Files (relative to the data dir) that agent code may read; everything else there is hidden.
    public_files: ClassVar[tuple[str, ...]] = ()
    # Fields every row of the task file must have; checked by load() before make_instance.
    record_fields: ClassVar[tuple[str, ...]] = ()

    def __init__(self, cfg: TaskConfig, data_dir: Path):
        self.cfg = cfg
        # The config's name is the task's identity in records (two configs may share one class).
        self.name = cfg.name
        self.data_dir = Path(data_dir)
        self.options: dict[str, Any] = dict(cfg.options or {})

    # ---- data -------------------------------------------------------------------------------------
    def required_files(self, split: str) -> list[str]:
        """Files (relative to the data dir) that must exist to run ``split``."""
        return [self.split_files[split], *self.public_files]

    def check_data(self, split: str) -> None:
        if split not in self.split_files:
            raise TaskFileError(
                f"Task {self.name!r} has no split {split!r}; use run.split= one of {sorted(self.split_files)}."
            )
        missing = [f for f in self.required_files(split) if not (self.data_dir / f).exists()]
        if missing:
            raise DataMissingError(self.name, self.data_dir, missing, self.how_to_obtain())

    def how_to_obtain(self) -> str:
        return (
            "These files come with the original MedAgentGym data release; most are derived from "
            "PhysioNet-credentialed databases, so obtain access on PhysioNet first. Or run on the bundled "
            "synthetic sample with data=sample."
        )

    def read_records(self, split: str) -> list[dict[str, Any]]:
        """Rows of the split's task file, in file order (JSON Lines, as the original release ships)."""
        path = self.data_dir / self.split_files[split]
        rows = []
        with open(path, encoding="utf-8") as fh:
            for lineno, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise TaskFileError(
                        f"Task file {path} line {lineno} is not valid JSON ({exc.msg}). The task files must be "
                        "the original release's JSON Lines, one object per line; re-download or regenerate it."
                    ) from None
        return rows

    def load(self, split: str) -> list[TaskInstance]:
        self.check_data(split)
        rows = self.read_records(split)
        for i, rec in enumerate(rows):
            missing = [f for f in self.record_fields if f not in rec]
            if missing:
                raise TaskFileError(
                    f"Row {i} of {self.data_dir / self.split_files[split]} lacks {missing}. The {self.name} task "
                    f"file must be the original release's JSON Lines, each row with {', '.join(self.record_fields)}."
                )
        return [self.make_instance(split, i, rec) for i, rec in enumerate(rows)]

    @abstractmethod
    def make_instance(self, split: str, index: int, record: dict[str, Any]) -> TaskInstance:
        """Build the agent-visible goal from one task-file row; raise TaskFileError on a malformed row."""

    # ---- prompt and actions ----------------------------------------------------------------------
    @abstractmethod
    def instruction(self) -> str:
        """Task-level instructions for the system prompt (our own words)."""

    @property
    def actions(self) -> list[str]:
        return list(self.cfg.actions)

    # ---- episode ----------------------------------------------------------------------------------
    def sandbox_spec(self, inst: TaskInstance) -> SandboxSpec:
        public = [self.data_dir / f for f in self.public_files]
        hidden = [self.data_dir / f for f in self.split_files.values()]
        return SandboxSpec(readonly_paths=public, hidden_paths=hidden)

    def setup_episode(self, inst: TaskInstance, sandbox: Sandbox) -> None:  # noqa: B027 (optional hook)
        """Prepare per-episode state (e.g. reset a service). Default: nothing."""

    def program(self, inst: TaskInstance, code: str) -> str:
        """What validate_code runs for a submission: the code itself, or, for tasks whose grader runs it
        inside a larger program (a context to splice into, setup cells), that program without any gold,
        so the agent sees the errors the grader would see."""
        return code

    @abstractmethod
    def grade(self, inst: TaskInstance, result: ExecResult, code: str, sandbox: Sandbox) -> Verdict:
        """Grade one validate_code execution. Never called for a failed execution's success."""

    @abstractmethod
    def oracle_code(self, inst: TaskInstance) -> str:
        """Python code the oracle submits through validate_code, derived from the gold fields."""

    def request_info(self, params: dict[str, Any]) -> str:
        return "request_info is not available for this task."

    # ---- sample data ------------------------------------------------------------------------------
    @classmethod
    @abstractmethod
    def make_sample(cls, out_dir: Path) -> None:
        """Write deterministic synthetic data in the real layout into out_dir (= data_root/<task>)."""


def load_task_class(impl: str) -> type[Task]:
    module_name, _, class_name = impl.partition(":")
    try:
        cls = getattr(importlib.import_module(module_name), class_name)
    except (ImportError, AttributeError) as exc:
        raise TaskFileError(f"task.impl={impl!r} cannot be imported ({exc}); it must be 'module:Class'.") from None
    if not (isinstance(cls, type) and issubclass(cls, Task)):
        raise TaskFileError(f"task.impl={impl!r} is not a medagentgym.tasks.base.Task subclass.")
    return cls
