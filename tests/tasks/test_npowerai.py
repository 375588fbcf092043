"""N-PowerAI: golden grader cases, the sample oracle round trip, and conformance on the real files."""

from __future__ import annotations

import math
import re
from statistics import NormalDist

import pytest

from medagentgym.errors import TaskFileError
from medagentgym.grading.answers import NO_ANSWER
from medagentgym.tasks.npowerai import NPowerAI, check_answer
from medagentgym.types import TaskInstance
from tests.tasks.roundtrip import TRACEBACK, ok, real_task, run_and_grade, sample_task


@pytest.fixture(scope="module")
def task(tmp_path_factory):
    return sample_task(NPowerAI, tmp_path_factory.mktemp("data"))


def inst(gold, target: str) -> TaskInstance:
    rec = {"task_type": "t", "task_id": 1, "estimate_target": target, "question": "q", "answer": gold}
    return TaskInstance("npowerai", "test", 0, "0", "goal", record=rec)


@pytest.mark.parametrize(
    ("value", "gold", "target", "expected"),
    [
        (42, 42, "size", True),
        (42.0, 42, "size", True),
        ("42", 42, "size", True),
        ("42.0", 42, "size", True),  # int("42.0") raised in the original, failing a right answer
        (42.4, 42, "size", False),  # sizes are whole numbers; rounding is part of the question
        (43, 42, "size", False),
        (True, 1, "size", False),
        ([41, 42, 43], 42, "size", False),
        (0.8064, 0.806464834138584, "power", True),
        (0.8145, 0.806464834138584, "power", True),  # +1.0% relative
        (0.815, 0.806464834138584, "power", False),  # +1.06%
        (0.7985, 0.806464834138584, "power", True),
        (0.7984, 0.806464834138584, "power", False),  # -1.00002%
        (0.79, 0.806464834138584, "power", False),
        (80.6, 0.806464834138584, "power", False),  # a percentage is not a proportion
        ("0.8065", 0.806464834138584, "power", True),
        ("power = 0.8065", 0.806464834138584, "power", False),
        (NO_ANSWER, 42, "size", False),
    ],
)
def test_check_answer(value, gold, target, expected):
    assert check_answer(value, gold, target)[0] is expected


@pytest.mark.parametrize("stdout", ["0", "1", "True", "", "None", "0.5 0.6 0.7 0.8 0.9", "[10, 20, 30, 40, 42]"])
def test_adversarial_outputs_rejected(task, stdout):
    for i in (inst(42, "size"), inst(0.806464834138584, "power")):
        assert not task.grade(i, ok(stdout=stdout + "\n"), "", None).correct
        assert not task.grade(i, TRACEBACK, "", None).correct


def test_unusable_gold_is_invalid(task):
    assert task.grade(inst("many", "size"), ok(answer="3"), "", None).status == "invalid_task"
    assert task.grade(inst(0.5, "effect"), ok(answer="0.5"), "", None).status == "invalid_task"
    assert task.grade(inst(1.7, "power"), ok(answer="1.7"), "", None).status == "invalid_task"


def test_sample_gold_matches_stated_formulas(task):
    # Independent check of one closed form: one-sample two-sided z-test power at the sample's own numbers.
    row = next(i.record for i in task.load("test") if i.record["estimate_target"] == "power")
    found = re.search(
        r"value of (\d+) mmHg to ([\d.]+) mmHg.*known to be ([\d.]+) mmHg.*With (\d+) participants",
        row["question"],
    )
    mu0, mu1, sd, n = (float(g) for g in found.groups())
    z, e = NormalDist().inv_cdf(0.975), (mu0 - mu1) * math.sqrt(n) / sd
    assert row["answer"] == pytest.approx(NormalDist().cdf(e - z) + NormalDist().cdf(-e - z), rel=1e-12)


def test_sample_oracle_round_trip(task):
    for split in ("test", "train"):
        instances = task.load(split)
        assert 4 <= len(instances) <= 20
        assert {i.record["estimate_target"] for i in instances} == {"size", "power"}
        for i in instances:
            result, verdict = run_and_grade(task, i, task.oracle_code(i))
            assert result.ok and verdict.correct, (i.task_id, result, verdict)
            _, wrong = run_and_grade(task, i, "answer = 7.5")
            assert not wrong.correct


def test_malformed_row(tmp_path, task):
    (tmp_path / "test_tasks.jsonl").write_text('{"question": "q"}\n')
    with pytest.raises(TaskFileError, match="estimate_target"):
        NPowerAI(task.cfg, tmp_path).load("test")


@pytest.mark.parametrize(("split", "count"), [("test", 343), ("train", 865)])
def test_real_file_conformance(split, count):
    task = real_task(NPowerAI)
    instances = task.load(split)
    assert len(instances) == count
    assert len({i.task_id for i in instances}) == count

    def pass_rate(make_result) -> float:
        verdicts = [task.grade(i, make_result(i), "", None) for i in instances]
        assert all(v.status == "graded" for v in verdicts)
        return sum(v.correct for v in verdicts) / len(verdicts)

    assert pass_rate(lambda i: ok(answer=repr(i.record["answer"]))) == 1.0
    assert pass_rate(lambda i: ok(stdout=f"{float(i.record['answer'])}\n")) == 1.0
    for trivial in ("0", "True", "", "None"):
        assert pass_rate(lambda i, out=trivial: ok(stdout=out + "\n")) == 0.0
    # "1" is right only where the reference power is at least 0.99 (saturated designs).
    saturated = sum(i.record["estimate_target"] == "power" and i.record["answer"] >= 0.99 for i in instances)
    assert pass_rate(lambda i: ok(stdout="1\n")) == saturated / count
    assert pass_rate(lambda i: TRACEBACK) == 0.0
