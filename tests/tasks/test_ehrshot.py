"""EHRSHOT: prediction-CSV grader golden cases, sample oracle round trip, real task-file conformance."""

from __future__ import annotations

import json

import pytest

from medagentgym.config import SandboxConfig
from medagentgym.errors import DataMissingError
from medagentgym.grading.predictions import normalize_label, normalize_time, read_csv
from medagentgym.sandbox import create_sandbox
from medagentgym.tasks.ehrshot import EHRShot
from tests.tasks.roundtrip import TRACEBACK, ok, real_task, run_and_grade, sample_task

# Grading needs no numpy/pandas in the sandbox; without the preload a sandbox starts in a fraction of a second.
FAST = SandboxConfig(preload=[])


@pytest.fixture(scope="module")
def task(tmp_path_factory):
    return sample_task(EHRShot, tmp_path_factory.mktemp("ehrshot"))


def test_oracle_round_trip_on_sample(task):
    instances = task.load("test")
    assert 5 <= len(instances) <= 20
    for inst in instances:
        result, verdict = run_and_grade(task, inst, task.oracle_code(inst))
        assert result.ok, result.stderr
        assert verdict.correct and verdict.score == 1.0, (inst.task_id, verdict)


def _labels(task, inst):
    return read_csv(task.data_dir / inst.context["task_name"] / "test_labels.csv")


def _grade_file(task, inst, text: str, result=None, symlink_to=None):
    """Grade a prediction file written straight into a fresh sandbox workspace."""
    with create_sandbox(FAST, task.sandbox_spec(inst)) as sb:
        target = sb.workspace / task.prediction_file(inst)
        if symlink_to is not None:
            target.symlink_to(symlink_to)
        elif text is not None:
            target.write_text(text)
        return task.grade(inst, result or ok(answer=repr(str(target.name))), "", sb)


def _csv(rows, header="patient_id,prediction_time,prediction"):
    return header + "\n" + "".join(",".join(map(str, r)) + "\n" for r in rows)


@pytest.fixture(scope="module")
def inst(task):
    # lab_hyperkalemia: four classes, so "flip" and "dump every class" are meaningful.
    return next(i for i in task.load("test") if i.context["task_name"] == "lab_hyperkalemia")


def test_gold_labels_accepted_with_any_spelling(task, inst):
    labels = _labels(task, inst)
    gold = [(r["patient_id"], r["prediction_time"], r["value"]) for r in labels]
    assert _grade_file(task, inst, _csv(gold)).correct
    # The original's example header has spaces; ids may be written as tensor(...) and times with a 'T'.
    spelled = [(f"tensor({p})", t.replace(" ", "T"), f"{v}.0") for p, t, v in gold]
    verdict = _grade_file(task, inst, _csv(spelled, "patient_id, prediction_time, prediction"))
    assert verdict.correct and verdict.score == 1.0


def test_known_wrong_and_adversarial_predictions_rejected(task, inst):
    labels = _labels(task, inst)
    classes = sorted({r["value"] for r in labels})
    flipped = [(r["patient_id"], r["prediction_time"], classes[(classes.index(r["value"]) + 1) % len(classes)])
               for r in labels]
    assert _grade_file(task, inst, _csv(flipped)).score == 0.0
    dump = [(r["patient_id"], r["prediction_time"], c) for r in labels for c in classes]
    verdict = _grade_file(task, inst, _csv(dump))
    assert not verdict.correct and verdict.score == 0.0
    majority = max(classes, key=[r["value"] for r in labels].count)
    constant = [(r["patient_id"], r["prediction_time"], majority) for r in labels]
    verdict = _grade_file(task, inst, _csv(constant))
    assert not verdict.correct and "baseline" in verdict.reason


def test_accuracy_counts_every_test_label(task, inst):
    labels = _labels(task, inst)
    few = [(r["patient_id"], r["prediction_time"], r["value"]) for r in labels[:3]]
    verdict = _grade_file(task, inst, _csv(few))
    # The original divided by the predicted rows and would report 1.0 here.
    assert verdict.score == pytest.approx(3 / len(labels)) and not verdict.correct


def test_per_patient_predictions_apply_to_every_visit(task):
    inst = next(i for i in task.load("test") if i.context["task_name"] == "guo_los")
    labels = _labels(task, inst)
    first: dict[str, str] = {}
    for r in labels:
        first.setdefault(r["patient_id"], r["value"])
    assert len(first) < len(labels)  # some patients have two visits
    verdict = _grade_file(task, inst, _csv(first.items(), "patient_id,prediction"))
    agree = sum(1 for r in labels if r["value"] == first[r["patient_id"]])
    assert verdict.score == pytest.approx(agree / len(labels))


@pytest.mark.parametrize("answer", ["0", "1", "True", "", None])
def test_outputs_without_a_prediction_file_rejected(task, inst, answer):
    verdict = _grade_file(task, inst, None, result=ok(stdout=answer or "", answer=answer))
    assert not verdict.correct and "No prediction file" in verdict.reason


def test_failed_execution_never_passes(task, inst):
    gold = [(r["patient_id"], r["prediction_time"], r["value"]) for r in _labels(task, inst)]
    assert not _grade_file(task, inst, _csv(gold), result=TRACEBACK).correct


def test_symlink_to_hidden_labels_rejected(task, inst):
    target = task.data_dir / inst.context["task_name"] / "test_labels.csv"
    verdict = _grade_file(task, inst, None, symlink_to=target)
    assert not verdict.correct


def test_malformed_prediction_file_is_a_wrong_answer_not_a_crash(task, inst):
    verdict = _grade_file(task, inst, "pid,label\n1,0\n")
    assert not verdict.correct and "lacks the column" in verdict.reason


def test_test_labels_hidden_and_training_data_readable(task, inst):
    spec = task.sandbox_spec(inst)
    hidden = {p.name for p in spec.hidden_paths}
    readable = {str(p.relative_to(task.data_dir)) for p in spec.readonly_paths}
    assert "test_labels.csv" in hidden and "task.jsonl" in hidden
    assert not any(r.endswith("test_labels.csv") for r in readable)
    assert {"clmbr_train.pkl", "clmbr_test.pkl", "guo_los/train_labels.csv"} <= readable
    assert str(task.data_dir / "clmbr_test.pkl") in inst.goal and "predictions-lab_hyperkalemia.csv" in inst.goal
    assert "test_labels" not in inst.goal


def test_both_modes_read_the_one_task_file(task):
    assert [i.task_id for i in task.load("train")] == [i.task_id for i in task.load("test")]


def test_missing_data_names_the_files(task, tmp_path):
    (tmp_path / "task.jsonl").write_text(json.dumps({"task_id": 0, "task_name": "guo_los", "task_description": "x"}))
    with pytest.raises(DataMissingError) as err:
        EHRShot(task.cfg, tmp_path).load("test")
    assert "clmbr_train.pkl" in str(err.value) and "guo_los/test_labels.csv" in str(err.value)


def test_normalisation():
    assert normalize_label("True") == normalize_label("1") == normalize_label("1.0") == "1"
    assert normalize_label("tensor(8192)") == "8192" and normalize_label(" CONTROL ") == "control"
    assert normalize_label("2") != normalize_label("12")
    assert normalize_time("2020-01-01 23:59:00") == normalize_time("2020-01-01T23:59:00")


def test_real_task_file_conformance():
    real = real_task(EHRShot)
    rows = real.read_records("test")
    assert len(rows) == 15 and [r["task_id"] for r in rows] == list(range(15))
    instances = [real.make_instance("test", i, r) for i, r in enumerate(rows)]
    names = [i.context["task_name"] for i in instances]
    assert len(set(names)) == 15 and {"guo_los", "chexpert", "lab_anemia"} <= set(names)
    for inst in instances:
        assert real.prediction_file(inst) in inst.goal
        assert str(real.data_dir / inst.context["task_name"] / "train_labels.csv") in inst.goal


def test_agent_code_cannot_read_the_test_labels(task, inst):
    hidden = task.data_dir / inst.context["task_name"] / "test_labels.csv"
    with create_sandbox(FAST, task.sandbox_spec(inst)) as sb:
        readable = sb.run_python(f"answer = len(open({str(task.data_dir / 'clmbr_train.pkl')!r}, 'rb').read())")
        assert readable.ok and int(readable.answer) > 0
        assert not sb.run_python(f"print(open({str(hidden)!r}).read())").ok
