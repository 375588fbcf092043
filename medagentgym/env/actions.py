"""Carrying out one parsed action inside an episode: sandbox runs, grading, debugging, lookups."""

from __future__ import annotations

import logging
import time
from typing import Any

from medagentgym.agent.prompt import truncate
from medagentgym.sandbox.base import Sandbox
from medagentgym.types import Action, ExecResult, Observation, TaskInstance, Verdict

log = logging.getLogger(__name__)

DEBUG_SYSTEM = (
    "You are a careful Python debugging assistant. Given code and the error it produced, explain the cause "
    "in a few sentences and show the corrected code."
)


class Environment:
    """One episode's world: the task instance, its sandbox and the optional debugging model."""

    def __init__(self, task: Any, inst: TaskInstance, sandbox: Sandbox, debugger: Any, max_chars: int,
                 deadline: float | None = None, exec_timeout: float | None = None):
        self.task, self.inst, self.sandbox = task, inst, sandbox
        self.debugger = debugger
        self.max_chars = max_chars
        self.deadline = deadline  # time.monotonic() by which the episode must end
        self.exec_timeout = exec_timeout  # the sandbox's configured per-execution timeout

    def _timeout(self) -> float | None:
        """The sandbox's own timeout, shortened so one execution cannot outlast the episode's limit."""
        if self.deadline is None:
            return None
        return max(1.0, min(self.exec_timeout or float("inf"), self.deadline - time.monotonic()))

    def step(self, action: Action) -> Observation:
        handler = getattr(self, f"_{action.name}")
        return handler(action.params)

    def _validate_code(self, params: dict[str, str]) -> Observation:
        code = params["code"]
        result = self.sandbox.run_python(self.task.program(self.inst, code), timeout=self._timeout())
        if result.status == "sandbox_error":
            return Observation("validate_code", self._exec_text(result), exec=result, infra_error=result.note)
        if not result.ok:
            verdict = Verdict(False, 0.0, f"execution {result.status}")
        else:
            try:
                verdict = self.task.grade(self.inst, result, code, self.sandbox)
            except Exception as exc:  # grading bugs are infrastructure, never the agent's fault
                log.exception("grader failed on %s/%s", self.inst.task, self.inst.index)
                verdict = Verdict(False, 0.0, f"grader raised {type(exc).__name__}: {exc}", status="grader_error")
        return Observation("validate_code", self._exec_text(result), exec=result, verdict=verdict)

    def _terminal(self, params: dict[str, str]) -> Observation:
        result = self.sandbox.run_shell(params["cmd"], timeout=self._timeout())
        infra = result.note if result.status == "sandbox_error" else None
        return Observation("terminal", self._exec_text(result), exec=result, infra_error=infra)

    def _request_info(self, params: dict[str, str]) -> Observation:
        try:
            text = self.task.request_info(params)
        except Exception as exc:  # a bad lookup is the agent's to fix, not a crash
            text = f"request_info failed: {type(exc).__name__}: {exc}"
        return Observation("request_info", truncate(text, self.max_chars))

    def _debug(self, params: dict[str, str]) -> Observation:
        if self.debugger is None:
            return Observation("debug", "The debugging assistant is not available in this run.")
        messages = [
            {"role": "system", "content": DEBUG_SYSTEM},
            {"role": "user", "content": f"Code:\n{params['code']}\n\nError:\n{params['error_msg']}"},
        ]
        try:
            reply = self.debugger.complete(messages, context=self.inst).text
        except Exception as exc:  # the agent can go on without advice
            log.warning("debugger failed: %s", exc)
            reply = f"The debugging assistant failed ({type(exc).__name__}); continue without it."
        return Observation("debug", truncate(reply, self.max_chars))

    def _exec_text(self, r: ExecResult) -> str:
        head = f"Execution status: {r.status}"
        if r.exit_code is not None:
            head += f" (exit code {r.exit_code})"
        head += f", {r.duration_s:.2f} s"
        parts = [head]
        if r.note:
            parts.append(f"Note: {r.note}")
        parts.append("stdout:\n" + (truncate(r.stdout, self.max_chars) if r.stdout else "(empty)"))
        if r.stderr:
            parts.append("stderr:\n" + truncate(r.stderr, self.max_chars))
        if r.answer is not None:
            parts.append("answer = " + truncate(r.answer, self.max_chars // 4))
        return "\n".join(parts)
