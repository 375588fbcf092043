"""Checks shared by the EHR SQL task tests: oracle round trip, adversarial outputs, and conformance
measurements on the real task files (ours beside the original's substring rule)."""

from __future__ import annotations

import json
from typing import Any

from medagentgym.tasks.base import Task
from medagentgym.types import ExecResult, TaskInstance
from tests.tasks.roundtrip import TRACEBACK, ok, run_and_grade

# Two error outputs as agents produce them: a short sqlite3 error and a long pandas KeyError chain.
SQL_TRACEBACK = (
    'Traceback (most recent call last):\n  File "/tmp/tmp3x7k2q/code.py", line 12, in <module>\n'
    "    rows = cur.execute(query).fetchall()\nsqlite3.OperationalError: no such column: admissions.admit_time\n"
)
PANDAS_TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File "/usr/lib/python3.11/site-packages/pandas/core/indexes/base.py", line 3805, in get_loc\n'
    "    return self._engine.get_loc(casted_key)\n"
    '  File "index.pyx", line 167, in pandas._libs.index.IndexEngine.get_loc\n'
    '  File "index.pyx", line 196, in pandas._libs.index.IndexEngine.get_loc\n'
    '  File "pandas/_libs/hashtable_class_helper.pxi", line 7081, in '
    "pandas._libs.hashtable.PyObjectHashTable.get_item\n"
    "KeyError: 'ROUTE'\n\nThe above exception was the direct cause of the following exception:\n\n"
    "Traceback (most recent call last):\n"
    '  File "/tmp/tmpk2m9x1/code.py", line 8, in <module>\n    answer = df[df.DRUG == drug]["ROUTE"].unique()\n'
    '  File "/usr/lib/python3.11/site-packages/pandas/core/frame.py", line 4102, in __getitem__\n'
    "    indexer = self.columns.get_loc(key)\n"
    '  File "/usr/lib/python3.11/site-packages/pandas/core/indexes/base.py", line 3812, in get_loc\n'
    "    raise KeyError(key) from err\nKeyError: 'ROUTE'\n"
)
TRIVIAL_OUTPUTS = {"sql traceback": SQL_TRACEBACK, "pandas traceback": PANDAS_TRACEBACK, "0": "0", "1": "1",
                   "True": "True", "empty": ""}


def failed(stderr: str) -> ExecResult:
    return ExecResult("error", stderr=stderr, exit_code=1)


def as_run(output: str) -> ExecResult:
    """How an output reaches our grader: tracebacks as failed runs, anything else printed by a clean run."""
    return failed(output) if output.startswith("Traceback") else ok(stdout=output + "\n")


def original_substring_rule(gold: Any, output: str) -> bool:
    """The original MIMIC-III/eICU/TREQS check, restated: the first gold item (with a few rewrites) must
    occur as a substring of the run's output, whether or not the run failed."""
    first = gold[0] if isinstance(gold, list) else gold
    if not isinstance(first, str):
        first = str(first)
    matched_raw = first in output
    output = output.replace("True", "1") if "True" in output else output.replace("False", "0")
    first = {"False": "0", "false": "0", "True": "1", "true": "1", "None": "0", "none": "0"}.get(first, first)
    parts = first.split(", ") if ", " in first else [first.removesuffix(".0")]
    return matched_raw or all(p in output for p in parts)


def assert_oracle_round_trip(task: Task) -> list[TaskInstance]:
    insts = task.load("test")
    assert 5 <= len(insts) <= 20
    for inst in insts:
        result, verdict = run_and_grade(task, inst, task.oracle_code(inst))
        assert result.ok, result.stderr
        assert verdict.correct, (inst.goal, verdict.reason)
    return insts


def assert_adversarial_rejected(task: Task, inst: TaskInstance, candidates: list[Any]) -> None:
    """Failed runs, trivial prints and a dump of every candidate never pass."""
    assert not task.grade(inst, TRACEBACK, "", None).correct
    assert not task.grade(inst, failed(SQL_TRACEBACK), "", None).correct
    for stdout in ("0", "1", "True", "", "None"):
        assert not task.grade(inst, ok(stdout=stdout), "", None).correct, stdout
    assert not task.grade(inst, ok(answer=repr(candidates)), "", None).correct


def real_instances(task: Task, split: str) -> list[TaskInstance]:
    """Instances of a real task file; the databases beside it are credentialed and absent here."""
    return [task.make_instance(split, i, rec) for i, rec in enumerate(task.read_records(split))]


def read_jsonl(path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def pass_rates(task: Task, insts: list[TaskInstance], gold_field: str) -> dict[str, tuple[float, float]]:
    """{output name: (our pass rate, the original rule's pass rate)} over the instances."""
    rates = {}
    for name, output in TRIVIAL_OUTPUTS.items():
        ours = sum(task.grade(i, as_run(output), "", None).correct for i in insts)
        theirs = sum(original_substring_rule(i.record[gold_field], output) for i in insts)
        rates[name] = (ours / len(insts), theirs / len(insts))
    return rates
