"""The oracle: replies with the task's gold solution as a validate_code action, through the normal loop."""

from __future__ import annotations

import json
from typing import Any

from medagentgym.types import Completion, TaskInstance


class OracleModel:
    def __init__(self, task: Any):
        self.task = task

    def complete(self, messages: list[dict[str, str]], *, temperature: float | None = None,
                 context: TaskInstance | None = None) -> Completion:
        if context is None:
            raise ValueError("the oracle needs the task instance")
        code = self.task.oracle_code(context)
        return Completion(text=json.dumps({"action": "validate_code", "params": {"code": code}}))

    def close(self) -> None:
        pass
