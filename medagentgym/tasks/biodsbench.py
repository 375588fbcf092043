"""BioDSBench: data-science questions over cBioPortal study tables, checked by each task's own asserts.

Task file rows hold the query, a description of the study's data frames, code_histories (setup cells the
question builds on), reference_answer, test_cases (asserts; gold) and study_ids / question_ids. Study tables
live at ``data/<study_id>/data_*.csv`` under the task's data dir; the original's ``/workdir`` paths are
rewritten there. Grading runs setup cells + the agent's code + the asserts in one program; it passes only
when every assert holds and the program reaches its end.
"""

from __future__ import annotations

import ast
import re
import secrets
from pathlib import Path
from typing import Any

from medagentgym.errors import TaskFileError
from medagentgym.sandbox.base import Sandbox, SandboxSpec
from medagentgym.tasks.base import Task
from medagentgym.types import ExecResult, TaskInstance, Verdict

_FIELDS = ("queries", "dataframes", "code_histories", "test_cases", "study_ids", "question_ids")
_WORKDIR = re.compile(r"/workdir(?=[/'\"`\s\\)]|$)", re.MULTILINE)
# Runs the asserts with pristine builtins and without globals that shadow them (an agent defining
# `abs = lambda x: 0` must not pass `assert abs(p - 0.06) < 1e-8`), then prints a per-run nonce: code that
# exits early (os._exit(0), sys.exit()) never reaches it. The runner itself calls the snapshot's exec and
# print, so shadowing those globals cannot skip the asserts either.
_TEST_RUNNER = """
_mag_ns = {{k: v for k, v in globals().items() if k not in _mag_builtins or k.startswith('__')}}
_mag_ns['__builtins__'] = _mag_builtins
_mag_builtins['exec'](_mag_builtins['compile']({tests!r}, '<test_cases>', 'exec'), _mag_ns)
_mag_builtins['print']({nonce!r})
"""
_SNAPSHOT = "import builtins as _mag_b\n_mag_builtins = dict(vars(_mag_b))\n"


def parse_cells(text: str) -> list[str]:
    """code_histories as a list of cells: the field is a Python list literal written as a string."""
    if not text or not text.strip():
        return []
    cells = ast.literal_eval(text)
    if not isinstance(cells, list) or not all(isinstance(c, str) for c in cells):
        raise ValueError("not a list of strings")
    return cells


class BioDSBench(Task):
    name = "biodsbench"
    record_fields = _FIELDS

    def study_dir(self, record: dict[str, Any]) -> Path:
        return (self.data_dir / "data" / str(record["study_ids"])).resolve()

    def rewrite(self, text: str, record: dict[str, Any]) -> str:
        return _WORKDIR.sub(str(self.study_dir(record)).replace("\\", "\\\\"), text)

    def required_files(self, split: str) -> list[str]:
        files = [self.split_files[split]]
        if (self.data_dir / files[0]).exists():
            files += sorted({f"data/{r.get('study_ids')}" for r in self.read_records(split)})
        return files

    def how_to_obtain(self) -> str:
        return (
            "The task files come with the MedAgentGym release; the study tables are public cBioPortal "
            "downloads (one folder per PubMed study id, data_*.csv converted from the study's data_*.txt)."
        )

    def make_instance(self, split: str, index: int, record: dict[str, Any]) -> TaskInstance:
        try:
            cells = [self.rewrite(c, record) for c in parse_cells(record["code_histories"])]
        except (ValueError, SyntaxError):
            raise TaskFileError(
                f"BioDSBench row {index}: code_histories is not a list literal of code cells; re-download "
                "the task file."
            ) from None
        parts = [record["queries"].strip()]
        if self.options.get("cot_hint", True) and record.get("cot_instructions"):
            parts.append(f"Suggested steps: {self.rewrite(record['cot_instructions'], record).strip()}")
        parts.append(
            f"Data (read the files at these paths):\n{self.rewrite(record['dataframes'], record).strip()}"
        )
        if cells:
            parts.append(
                "These setup cells ran before your code; their variables are available to it:\n"
                + "\n".join(f"```python\n{c.strip()}\n```" for c in cells)
            )
        parts.append("Write Python code that computes the result and stores it under the name the question gives.")
        task_id = f"{record['study_ids']}-{record['question_ids']}"
        ctx = {"study_id": str(record["study_ids"]), "setup_cells": cells}
        return TaskInstance(self.name, split, index, task_id, "\n\n".join(parts), ctx, record)

    def instruction(self) -> str:
        return (
            "You are a bioinformatician analysing cancer genomics studies with pandas (and lifelines, "
            "scipy or matplotlib where useful). Each question names the variable your result must be "
            "saved in. Your submitted code runs after the question's setup cells, as one program; it is "
            "then graded by running the setup cells, your code and hidden assertions about the named "
            "variables in one program. All assertions must hold."
        )

    def sandbox_spec(self, inst: TaskInstance) -> SandboxSpec:
        spec = super().sandbox_spec(inst)
        spec.readonly_paths.append(self.study_dir(inst.record))
        spec.python = self.options.get("python") or None
        return spec

    def program(self, inst: TaskInstance, code: str) -> str:
        return "\n".join([*inst.context["setup_cells"], code])

    def grade(self, inst: TaskInstance, result: ExecResult, code: str, sandbox: Sandbox) -> Verdict:
        if not result.ok:
            return Verdict(False, reason=f"your code ended with status {result.status}")
        tests = self.rewrite(inst.record["test_cases"], inst.record)
        try:
            compile(tests, "<test_cases>", "exec")
        except SyntaxError as exc:
            return Verdict(False, reason=f"the task's test_cases do not parse: {exc}", status="invalid_task")
        if not tests.strip():
            return Verdict(False, reason="the task has no test_cases", status="invalid_task")
        nonce = f"tests-passed-{secrets.token_hex(8)}"
        program = "\n".join(
            [_SNAPSHOT, *inst.context["setup_cells"], code, _TEST_RUNNER.format(tests=tests, nonce=nonce)]
        )
        run = sandbox.run_python(program)
        if run.status == "sandbox_error":
            return Verdict(False, reason=f"sandbox error: {run.note}", status="grader_error")
        passed = run.ok and nonce in run.stdout.splitlines()
        if passed:
            return Verdict(True, 1.0, "all assertions hold")
        if "AssertionError" in run.stderr:
            return Verdict(False, 0.0, "an assertion failed")
        if run.ok:
            return Verdict(False, 0.0, "the program stopped before the assertions ran")
        return Verdict(False, 0.0, f"the program ended with status {run.status}")

    def oracle_code(self, inst: TaskInstance) -> str:
        reference = self.rewrite(inst.record.get("reference_answer", ""), inst.record)
        return "\n".join([*inst.context["setup_cells"], reference])

    @classmethod
    def make_sample(cls, out_dir: Path) -> None:
        from medagentgym.tasks.biodsbench_sample import write_sample

        write_sample(Path(out_dir), cls.split_files)
