"""Small typed values that cross module boundaries.

Everything the runner, agent, sandbox and tasks hand each other is one of these, so a reader can
follow the data flow without chasing dictionaries.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# Outcome statuses of an episode. INFRA_STATUSES are failures of the harness or its services, not of the
# agent: they are excluded from success-rate denominators and retried when a run is resumed.
SUCCESS = "success"
WRONG_ANSWER = "wrong_answer"
STEP_BUDGET = "step_budget"
PARSE_FAILURE = "parse_failure"
LLM_ERROR = "llm_error"
SANDBOX_ERROR = "sandbox_error"
TIMEOUT = "timeout"
GRADER_ERROR = "grader_error"
INVALID_TASK = "invalid_task"

STATUSES = (
    SUCCESS,
    WRONG_ANSWER,
    STEP_BUDGET,
    PARSE_FAILURE,
    LLM_ERROR,
    SANDBOX_ERROR,
    TIMEOUT,
    GRADER_ERROR,
    INVALID_TASK,
)
INFRA_STATUSES = frozenset({LLM_ERROR, SANDBOX_ERROR, GRADER_ERROR})
# Instances whose own gold is unusable (e.g. a reference solution that crashes) count in neither column.
EXCLUDED_STATUSES = INFRA_STATUSES | {INVALID_TASK}


@dataclass
class TaskInstance:
    """One benchmark item as the agent may see it, plus the raw record the task's grader uses.

    `record` holds the original task-file row including gold fields; it never reaches prompts, the
    sandbox, logs or exports. Only `goal` and `context` are shown to the agent.
    """

    task: str
    split: str
    index: int
    task_id: str
    goal: str
    context: dict[str, Any] = field(default_factory=dict)
    record: dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass
class Action:
    """A parsed agent action: one of the task's permitted action names and its params."""

    name: str
    params: dict[str, Any]


@dataclass
class ExecResult:
    """What one sandbox execution produced.

    status: "ok" (exit 0), "error" (the code failed: non-zero exit, exception), "timeout" (wall clock),
    "limit" (a resource limit killed it), or "sandbox_error" (the sandbox itself failed; infrastructure).
    `answer` is repr() of the variable `answer` after Python code ran, None when undefined.
    """

    status: str
    stdout: str = ""
    stderr: str = ""
    exit_code: int | None = None
    answer: str | None = None
    duration_s: float = 0.0
    note: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "ok"


@dataclass
class Verdict:
    """A grader's decision on one submitted answer.

    `status` is "graded" for a real decision, "grader_error" when grading itself failed (infrastructure),
    "invalid_task" when the instance's own gold is unusable.
    """

    correct: bool
    score: float = 0.0
    reason: str = ""  # for the record; may quote the gold, so it is never shown to the agent
    status: str = "graded"
    feedback: str = ""  # what the agent may be told beyond right/wrong (never the gold)


@dataclass
class Observation:
    """What an action returned: the text shown to the agent plus structured fields for the runner."""

    action: str
    text: str
    exec: ExecResult | None = None
    verdict: Verdict | None = None
    infra_error: str | None = None


@dataclass
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0

    def add(self, other: Usage) -> None:
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.cost += other.cost


@dataclass
class Completion:
    """One model reply."""

    text: str
    usage: Usage = field(default_factory=Usage)
    latency_s: float = 0.0
    finish_reason: str | None = None
    retries: int = 0
