"""MedCalc-Bench: golden grader cases, the sample oracle round trip, and conformance on the real test file."""

from __future__ import annotations

import json

import pytest

from medagentgym.errors import DataMissingError, TaskFileError
from medagentgym.grading.answers import NO_ANSWER
from medagentgym.tasks.medcalcbench import MedCalcBench, check_answer, gold_kind
from medagentgym.types import ExecResult, TaskInstance
from tests.tasks.roundtrip import TRACEBACK, ok, real_task, run_and_grade, sample_task


def inst(gold: str, lower: str | None = None, upper: str | None = None) -> TaskInstance:
    rec = {"Ground Truth Answer": gold, "Lower Limit": lower or gold, "Upper Limit": upper or gold}
    return TaskInstance("medcalcbench", "test", 0, "1", "goal", record=rec)


@pytest.fixture(scope="module")
def task(tmp_path_factory):
    return sample_task(MedCalcBench, tmp_path_factory.mktemp("data"))


@pytest.mark.parametrize(
    ("value", "gold", "lower", "upper", "expected"),
    [
        (25.238, "25.238", "23.9761", "26.4999", True),
        ("24.0", "25.238", "23.9761", "26.4999", True),  # inside the +-5% band
        (26.6, "25.238", "23.9761", "26.4999", False),
        (23.9, "25.238", "23.9761", "26.4999", False),
        (-2, "-2", "-2", "-2", True),  # negative golds fail under the original's float test
        (-2.1, "-2.1", "-2.205", "-1.995", True),
        (2, "-2", "-2", "-2", False),
        (3.0, "3", "3", "3", True),
        (2.9999999999999996, "3", "3", "3", True),  # float noise from a correct computation
        (4, "3", "3", "3", False),
        (True, "1", "1", "1", False),  # a boolean is not a score
        ([3, 4, 5], "3", "3", "3", False),
        ("3 points", "3", "3", "3", False),
        ("09/23/2014", "09/23/2014", None, None, True),
        ("9/23/2014", "09/23/2014", None, None, True),
        ("2014-09-23", "09/23/2014", None, None, True),
        ("datetime.date(2014, 9, 23)", "09/23/2014", None, None, True),
        ("09/24/2014", "09/23/2014", None, None, False),
        ("23/09/2014", "09/23/2014", None, None, False),
        ("The due date is 09/23/2014", "09/23/2014", None, None, False),
        (0, "09/23/2014", None, None, False),
        (("0 weeks", "6 days"), "('0 weeks', '6 days')", None, None, True),
        ((0, 6), "('0 weeks', '6 days')", None, None, True),
        ("(14 weeks, 1 days)", "('14 weeks', '1 days')", None, None, True),
        ((14, 2), "('14 weeks', '1 days')", None, None, False),
        ((14, 1, 0), "('14 weeks', '1 days')", None, None, False),
        (0, "('14 weeks', '1 days')", None, None, False),
        (NO_ANSWER, "3", "3", "3", False),
    ],
)
def test_check_answer(value, gold, lower, upper, expected):
    assert check_answer(value, gold, lower or gold, upper or gold)[0] is expected


def test_gold_kinds():
    assert gold_kind("12/31/2009") == "date"
    assert gold_kind("('3 weeks', '4 days')") == "weeks_days"
    assert gold_kind("-1") == "number"
    assert gold_kind("n/a") == "unusable"


def test_grade_reads_answer_then_stdout_and_rejects_failures(task):
    i = inst("56.667", "53.83365", "59.50035")
    assert task.grade(i, ok(answer="56.7"), "", None).correct
    assert task.grade(i, ok(stdout="computing...\n56.5\n"), "", None).correct
    assert not task.grade(i, ok(stdout="56.667\nsomething else\n"), "", None).correct
    # The answer variable wins over printed text, and a crash after printing the gold never passes.
    assert not task.grade(i, ok(stdout="56.667\n", answer="12.0"), "", None).correct
    assert not task.grade(i, ExecResult("error", stdout="56.667\n", exit_code=1), "", None).correct
    assert not task.grade(i, ExecResult("timeout"), "", None).correct


@pytest.mark.parametrize("stdout", ["0", "1", "True", "", "None", "56.667 60 50 45 100", "[50, 55, 56.667, 58]"])
def test_adversarial_outputs_rejected(task, stdout):
    assert not task.grade(inst("56.667", "53.83365", "59.50035"), ok(stdout=stdout + "\n"), "", None).correct
    assert not task.grade(inst("56.667", "53.83365", "59.50035"), TRACEBACK, "", None).correct


def test_unusable_gold_is_invalid_task(task):
    assert task.grade(inst("see note"), ok(answer="1"), "", None).status == "invalid_task"
    # A gold outside its own limits cannot be graded fairly either.
    assert task.grade(inst("10", "11", "12"), ok(answer="10"), "", None).status == "invalid_task"


def test_sample_oracle_round_trip(task):
    instances = task.load("test")
    assert 5 <= len(instances) <= 20
    kinds = {gold_kind(i.record["Ground Truth Answer"]) for i in instances}
    assert kinds == {"number", "date", "weeks_days"}
    for i in instances:
        assert i.record["Patient Note"] in i.goal
        if len(i.record["Ground Truth Answer"]) > 3:  # short scores like "4" occur in any text
            assert i.record["Ground Truth Answer"] not in i.goal
        result, verdict = run_and_grade(task, i, task.oracle_code(i))
        assert result.ok and verdict.correct, (i.task_id, result, verdict)
        _, wrong = run_and_grade(task, i, "answer = 'no idea'")
        assert not wrong.correct


def test_sample_is_deterministic(tmp_path):
    MedCalcBench.make_sample(tmp_path)
    first = (tmp_path / "test_tasks.jsonl").read_text()
    MedCalcBench.make_sample(tmp_path)
    assert (tmp_path / "test_tasks.jsonl").read_text() == first


def test_method_hint_option(tmp_path_factory):
    root = tmp_path_factory.mktemp("hint")
    with_hint = sample_task(MedCalcBench, root).load("test")[0]
    without = sample_task(MedCalcBench, root, method_hint=False).load("test")[0]
    assert "How this calculator works" in with_hint.goal
    assert "How this calculator works" not in without.goal


def test_missing_and_malformed_data(tmp_path):
    task = MedCalcBench(sample_task(MedCalcBench, tmp_path).cfg, tmp_path / "nowhere")
    with pytest.raises(DataMissingError, match="test_tasks.jsonl"):
        task.load("test")
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "test_tasks.jsonl").write_text(json.dumps({"Question": "q"}) + "\n")
    with pytest.raises(TaskFileError, match="Patient Note"):
        MedCalcBench(task.cfg, bad).load("test")


def test_real_file_conformance():
    task = real_task(MedCalcBench)
    instances = task.load("test")
    assert len(instances) == 1047
    assert len({i.task_id for i in instances}) == 1047

    def pass_rate(make_result) -> float:
        verdicts = [task.grade(i, make_result(i), "", None) for i in instances]
        assert all(v.status == "graded" for v in verdicts)
        return sum(v.correct for v in verdicts) / len(verdicts)

    assert pass_rate(lambda i: ok(answer=repr(i.record["Ground Truth Answer"]))) == 1.0
    assert pass_rate(lambda i: ok(stdout=i.record["Ground Truth Answer"] + "\n")) == 1.0
    # "0" is right exactly where the gold is 0 (35 rows: zero scores and risks), and nowhere else.
    zero_gold = sum(i.record["Ground Truth Answer"] == "0" for i in instances) / len(instances)
    assert pass_rate(lambda i: ok(stdout="0\n")) == zero_gold <= 0.034
    for trivial in ("True", "", "None", "12345", "-1e9"):  # the original passed 94% of rows for any number
        assert pass_rate(lambda i, out=trivial: ok(stdout=out + "\n")) == 0.0
    assert pass_rate(lambda i: TRACEBACK) == 0.0
