"""Shared helpers for task tests: a sample-data task, the oracle round trip, and the real task files."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from medagentgym.config import SandboxConfig, TaskConfig
from medagentgym.sandbox import create_sandbox
from medagentgym.tasks.base import Task
from medagentgym.tasks.sample import ensure_sample
from medagentgym.types import ExecResult, TaskInstance, Verdict

REPO = Path(__file__).resolve().parents[2]
# The real public task files live beside the repository, never inside it; tests skip when absent.
SHARED_TASKS = REPO / ".." / "shared" / "medagentgym-tasks"


def task_config(name: str, **options) -> TaskConfig:
    """The task's own conf/task/<name>.yaml, with options overridden."""
    raw = yaml.safe_load((REPO / "conf" / "task" / f"{name}.yaml").read_text())
    return TaskConfig(
        name=raw["name"], impl=raw["impl"], actions=raw["actions"], options={**raw.get("options", {}), **options}
    )


def sample_task(cls: type[Task], root: Path, **options) -> Task:
    data_dir = ensure_sample(cls, root / cls.name)
    return cls(task_config(cls.name, **options), data_dir)


def real_task(cls: type[Task], **options) -> Task:
    data_dir = SHARED_TASKS / cls.name
    if not data_dir.is_dir():
        pytest.skip(f"real task files not available at {data_dir}")
    return cls(task_config(cls.name, **options), data_dir)


# Graders need real execution, not isolation (tests/sandbox covers that): the process backend starts in
# milliseconds where each isolating sandbox takes about half a second, which would multiply these tests' time.
SANDBOX = SandboxConfig(backend="process")


def run_and_grade(task: Task, inst: TaskInstance, code: str) -> tuple[ExecResult, Verdict]:
    """What validate_code does: run the code in a fresh sandbox for the instance, then grade it there."""
    with create_sandbox(SANDBOX, task.sandbox_spec(inst)) as sb:
        result = sb.run_python(code)
        return result, task.grade(inst, result, code, sb)


def ok(stdout: str = "", answer: str | None = None) -> ExecResult:
    return ExecResult("ok", stdout=stdout, exit_code=0, answer=answer)


TRACEBACK = ExecResult(
    "error",
    stdout="",
    exit_code=1,
    stderr='Traceback (most recent call last):\n  File "<agent>", line 1, in <module>\n'
    "ZeroDivisionError: division by zero\n",
)
