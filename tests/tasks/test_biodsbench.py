"""BioDSBench: path rewriting, assert-based grading and its loopholes, sample oracle, real-file shape."""

from __future__ import annotations

import pandas as pd
import pytest

from medagentgym.errors import DataMissingError
from medagentgym.sandbox import create_sandbox
from medagentgym.tasks.biodsbench import BioDSBench, parse_cells
from medagentgym.types import ExecResult
from tests.tasks.roundtrip import SANDBOX, TRACEBACK, real_task, run_and_grade, sample_task


@pytest.fixture(scope="module")
def task(tmp_path_factory):
    return sample_task(BioDSBench, tmp_path_factory.mktemp("data"))


@pytest.fixture(scope="module")
def with_setup(task):
    """The sample question that builds on a setup cell (high_risk is defined there)."""
    return next(i for i in task.load("test") if i.context["setup_cells"])


def grade(task, inst, code: str, result: ExecResult | None = None):
    with create_sandbox(SANDBOX, task.sandbox_spec(inst)) as sb:
        return task.grade(inst, result or sb.run_python(code), code, sb)


def test_workdir_paths_rewritten(task, with_setup):
    study = str(task.study_dir(with_setup.record))
    assert "/workdir" not in with_setup.goal and study in with_setup.goal
    assert all("/workdir" not in c and study in c for c in with_setup.context["setup_cells"])
    assert task.rewrite("pd.read_csv('/workdir/x.csv'); os.listdir('/workdir')", with_setup.record) == (
        f"pd.read_csv('{study}/x.csv'); os.listdir('{study}')"
    )
    assert task.rewrite("/workdirs/x", with_setup.record) == "/workdirs/x"


def test_parse_cells():
    assert parse_cells("[]") == [] and parse_cells("") == []
    assert parse_cells("['a = 1', 'b = 2']") == ["a = 1", "b = 2"]
    with pytest.raises(ValueError):
        parse_cells("[1, 2]")


def test_golden_cases(task, with_setup):
    patients = pd.read_csv(task.study_dir(with_setup.record) / "data_clinical_patient.csv")
    mean = float(patients.query("IPI >= 3")["OS_MONTHS"].mean())
    setup = "\n".join(with_setup.context["setup_cells"])
    # Right: uses the setup cell's variable, or recomputes it independently.
    assert grade(task, with_setup, setup + "\nmean_os_high = high_risk['OS_MONTHS'].mean()").correct
    assert grade(task, with_setup, f"mean_os_high = {mean!r}").correct
    # Wrong value, wrong name, nothing.
    assert not grade(task, with_setup, f"mean_os_high = {mean + 0.01!r}").correct
    assert not grade(task, with_setup, f"mean_os = {mean!r}").correct
    assert not grade(task, with_setup, "pass").correct
    for stdout in ("0", "1", "True", ""):
        assert not grade(task, with_setup, f"print({stdout!r})").correct
    assert not grade(task, with_setup, "x", TRACEBACK).correct


@pytest.mark.parametrize(
    "cheat",
    [
        "import os\nos._exit(0)",  # skip the asserts by leaving early
        "import sys\nsys.exit(0)",
        "abs = lambda x: 0\nmean_os_high = 1.0",  # shadow a builtin the asserts use
        "import builtins\nbuiltins.abs = lambda x: 0\nmean_os_high = 1.0",
        "exec = lambda *a, **k: None\nmean_os_high = 1.0",  # skip the asserts by disarming exec
    ],
)
def test_loopholes_closed(task, with_setup, cheat):
    verdict = grade(task, with_setup, cheat)
    assert verdict.status == "graded" and not verdict.correct


def test_broken_tests_are_invalid(task, with_setup):
    inst = type(with_setup)(**{**with_setup.__dict__, "record": {**with_setup.record, "test_cases": "assert ("}})
    assert grade(task, inst, "x = 1").status == "invalid_task"


def test_sample_oracle_round_trip(task):
    for split in ("test", "train"):
        instances = task.load(split)
        assert 3 <= len(instances) <= 20
        for i in instances:
            assert i.record["test_cases"] not in i.goal
            result, verdict = run_and_grade(task, i, task.oracle_code(i))
            assert result.ok and verdict.correct, (i.task_id, result, verdict)


def test_missing_study_tables(task, tmp_path):
    (tmp_path / "test_tasks.jsonl").write_text((task.data_dir / "test_tasks.jsonl").read_text())
    with pytest.raises(DataMissingError, match="data/90000001"):
        BioDSBench(task.cfg, tmp_path).load("test")


@pytest.mark.parametrize(("split", "count"), [("test", 49), ("train", 50)])
def test_real_file_shape(split, count):
    task = real_task(BioDSBench)  # study tables are not public here: check the task files themselves
    records = task.read_records(split)
    instances = [task.make_instance(split, n, r) for n, r in enumerate(records)]
    assert len(instances) == count
    assert len({i.task_id for i in instances}) == count
    for i in instances:
        assert "/workdir" not in i.goal
        compile(task.rewrite(i.record["test_cases"], i.record), "<test_cases>", "exec")
