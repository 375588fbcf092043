"""BioCoder: write one bioinformatics function that is spliced into a given program.

Task file rows: idx, problem, signature, context (a program with one ``<<insert solution here>>`` line),
solution (the reference function) and code (the original's own splice, not used: its head is cut off).
The expected output is what the context prints with the reference solution spliced in, run twice in the
episode's sandbox interpreter and cached per process and on disk. References that crash, print nothing or
print different things on two runs, and contexts whose marker cannot be used, make the instance invalid.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import textwrap
from pathlib import Path
from typing import Any

from medagentgym.sandbox.base import Sandbox, SandboxSpec
from medagentgym.tasks.base import Task
from medagentgym.types import ExecResult, TaskInstance, Verdict

log = logging.getLogger(__name__)

MARKER = "<<insert solution here>>"
_FIELDS = ("idx", "problem", "signature", "context", "solution")
# Run every spliced program in a fresh empty directory with the workspace off sys.path, so files the agent
# left in its workspace (a fake numpy.py, say) cannot shadow modules or feed the program.
PRELUDE = (
    "import os as _mag_os, sys as _mag_sys, tempfile as _mag_tmp\n"
    "_mag_sys.path[:] = [p for p in _mag_sys.path if p not in ('', '.', _mag_os.getcwd())]\n"
    "_mag_os.chdir(_mag_tmp.mkdtemp(dir=_mag_os.getcwd()))\n"
)
# Per process: (interpreter, program) digest -> (expected stdout or None, reason when invalid).
_REFERENCE_CACHE: dict[str, tuple[str | None, str]] = {}


def function_name(signature: str) -> str | None:
    m = re.search(r"def\s+(\w+)\s*\(", signature)
    return m.group(1) if m else None


def marker_problem(context: str, signature: str) -> str | None:
    """Why the context cannot grade a spliced function, or None when it can."""
    if context.count(MARKER) != 1:
        return f"the context has {context.count(MARKER)} insertion markers, not one"
    start = context.rfind("\n", 0, context.index(MARKER)) + 1
    end = context.find("\n", start)
    line = context[start : end if end >= 0 else len(context)]
    if line.strip() != MARKER:
        return f"the insertion marker is not alone on its line ({line.strip()!r})"
    name, indent = function_name(signature), line[: len(line) - len(line.lstrip())]
    after = context[end:] if end >= 0 else ""
    if name and re.search(rf"^{re.escape(indent)}(?:async\s+)?def\s+{re.escape(name)}\s*\(", after, re.MULTILINE):
        # A later definition replaces the spliced one, so every submission would print the same thing.
        return f"the context defines {name}() again after the insertion point"
    return None


def splice(context: str, code: str) -> str:
    """The context with its marker line replaced by ``code``, indented to the marker's indentation."""
    start = context.rfind("\n", 0, context.index(MARKER)) + 1
    indent = context[start : context.index(MARKER)]
    end = context.find("\n", start)
    body = textwrap.indent(textwrap.dedent(code).strip("\n"), indent)
    return context[:start] + body + (context[end:] if end >= 0 else "\n")


def normalise_output(text: str) -> str:
    """Output as compared: line endings unified, trailing spaces and trailing blank lines dropped."""
    lines = [ln.rstrip() for ln in text.replace("\r\n", "\n").split("\n")]
    return "\n".join(lines).rstrip("\n")


class BioCoder(Task):
    name = "biocoder"
    record_fields = _FIELDS

    def make_instance(self, split: str, index: int, record: dict[str, Any]) -> TaskInstance:
        goal = (
            f"{record['problem'].strip()}\n\nSignature:\n{record['signature'].strip()}\n\n"
            f"Your code replaces the line `{MARKER}` in this program (indented to that line's level):\n"
            f"```python\n{record['context']}\n```\n"
            "Submit only the function (and any imports it needs) through validate_code; do not print or call it."
        )
        return TaskInstance(
            self.name, split, index, str(record["idx"]), goal, {"signature": record["signature"]}, record
        )

    def instruction(self) -> str:
        return (
            "You are a bioinformatics software engineer. Each task asks for one Python function with a given "
            "signature. Your code is spliced into a program at its insertion marker and the program is run; "
            "you pass when it prints exactly what it prints with the reference implementation. Submit the "
            "function definition alone: the program around it already has its imports and calls it."
        )

    # ---- sandbox ----------------------------------------------------------------------------------
    def cache_dir(self) -> Path:
        return Path(self.options.get("cache_dir") or self.data_dir / ".reference_outputs")

    def sandbox_spec(self, inst: TaskInstance) -> SandboxSpec:
        spec = super().sandbox_spec(inst)
        spec.hidden_paths.append(self.cache_dir())  # reference outputs are gold
        spec.python = self.options.get("python") or None
        return spec

    # ---- grading ----------------------------------------------------------------------------------
    def program(self, inst: TaskInstance, code: str) -> str:
        # The function runs where the grader runs it: inside the context, next to its imports and decorators.
        rec = inst.record
        if marker_problem(rec["context"], rec["signature"]):
            return code
        return PRELUDE + splice(rec["context"], code)

    def grade(self, inst: TaskInstance, result: ExecResult, code: str, sandbox: Sandbox) -> Verdict:
        rec = inst.record
        if not result.ok:
            return Verdict(False, reason=f"your code ended with status {result.status}")
        problem = marker_problem(rec["context"], rec["signature"])
        if problem:
            return Verdict(False, reason=problem, status="invalid_task")
        key = self._reference_key(inst, sandbox)
        expected, why = self.expected_output(inst, sandbox, key)
        if expected is None:
            status = "grader_error" if why.startswith("sandbox error") else "invalid_task"
            return Verdict(False, reason=why, status=status)
        run = sandbox.run_python(PRELUDE + splice(rec["context"], code))
        if run.status == "sandbox_error":
            return Verdict(False, reason=f"sandbox error: {run.note}", status="grader_error")
        if not run.ok:
            return Verdict(False, reason=f"the program with your function ended with status {run.status}")
        if normalise_output(run.stdout) == expected:
            return Verdict(True, 1.0, "output matches")
        # Before calling it wrong, check the reference still reproduces its output: two equal runs can hide
        # a coin flip (an unseeded random.randint(0, 1) matches itself half of the time).
        again = sandbox.run_python(PRELUDE + splice(rec["context"], rec["solution"]))
        if again.ok and normalise_output(again.stdout) != expected:
            outcome = (None, "the reference solution prints different output on repeated runs")
            self._remember(key, outcome, durable=True)
            return Verdict(False, reason=outcome[1], status="invalid_task")
        return Verdict(False, 0.0, "the program's output differs")

    def _reference_key(self, inst: TaskInstance, sandbox: Sandbox) -> str:
        # The interpreter decides what the reference can import, so it is part of the key.
        python = getattr(sandbox, "python", None) or self.options.get("python")
        return hashlib.sha256(
            f"{python}\0{inst.record['context']}\0{inst.record['solution']}".encode()
        ).hexdigest()

    def expected_output(self, inst: TaskInstance, sandbox: Sandbox, key: str) -> tuple[str | None, str]:
        """(stdout of the reference program, "") or (None, why the instance cannot be graded)."""
        if key in _REFERENCE_CACHE:
            return _REFERENCE_CACHE[key]
        disk = self.cache_dir() / f"{key}.json"
        if disk.exists():
            entry = json.loads(disk.read_text())
            _REFERENCE_CACHE[key] = (entry["stdout"], entry["reason"])
            return _REFERENCE_CACHE[key]
        outcome, durable = self._run_reference(inst.record, sandbox)
        if not outcome[1].startswith("sandbox error"):  # infrastructure: try again next time
            self._remember(key, outcome, durable)
        return outcome

    def _remember(self, key: str, outcome: tuple[str | None, str], durable: bool) -> None:
        _REFERENCE_CACHE[key] = outcome
        if durable:
            disk = self.cache_dir() / f"{key}.json"
            try:
                disk.parent.mkdir(parents=True, exist_ok=True)
                disk.write_text(json.dumps({"stdout": outcome[0], "reason": outcome[1]}))
            except OSError as exc:  # a read-only data dir only costs recomputation
                log.debug("cannot cache biocoder reference output in %s: %s", disk.parent, exc)

    @staticmethod
    def _run_reference(rec: dict[str, Any], sandbox: Sandbox) -> tuple[tuple[str | None, str], bool]:
        """Run the reference twice and a do-nothing stub once; also say whether the outcome is a property of
        the task (worth keeping on disk) rather than of this environment."""
        outputs = []
        for _ in range(2):
            run = sandbox.run_python(PRELUDE + splice(rec["context"], rec["solution"]))
            if run.status == "sandbox_error":
                return (None, f"sandbox error: {run.note}"), False
            if not run.ok:
                missing = re.search(r"ModuleNotFoundError: No module named '([^']+)'", run.stderr)
                if missing:
                    # The interpreter lacks a package, which installing it fixes: never cache on disk.
                    return (
                        None,
                        f"the reference needs the module {missing.group(1)!r}, which the sandbox interpreter "
                        "lacks; set task.options.python (or sandbox.python) to an interpreter that has it",
                    ), False
                tail = run.stderr.strip()[-300:]
                return (None, f"the reference solution fails ({run.status}): {tail}"), run.status == "error"
            outputs.append(normalise_output(run.stdout))
        if not outputs[0]:
            return (None, "the reference solution prints nothing"), True
        if outputs[0] != outputs[1]:
            return (None, "the reference solution prints different output on two runs"), True
        name = function_name(rec["signature"])
        stub = sandbox.run_python(
            PRELUDE + splice(rec["context"], f"def {name}(*args, **kwargs):\n    return None\n")
        )
        if stub.status == "sandbox_error":
            return (None, f"sandbox error: {stub.note}"), False
        if stub.ok and normalise_output(stub.stdout) == outputs[0]:
            # e.g. a main() that never calls the function: any submission would pass.
            return (None, f"the program prints the same without a working {name}()"), True
        return (outputs[0], ""), True

    def oracle_code(self, inst: TaskInstance) -> str:
        return inst.record["solution"]

    @classmethod
    def make_sample(cls, out_dir: Path) -> None:
        from medagentgym.tasks.biocoder_sample import sample_rows

        with open(Path(out_dir) / cls.split_files["test"], "w", encoding="utf-8") as fh:
            fh.writelines(json.dumps(row) + "\n" for row in sample_rows())
