"""MIMIC-Extract: admission-level and window-level grader golden cases, sample oracle, real-file conformance."""

from __future__ import annotations

import pytest

from medagentgym.config import SandboxConfig
from medagentgym.errors import UserError
from medagentgym.grading.predictions import read_csv
from medagentgym.sandbox import create_sandbox
from medagentgym.tasks.mimic_extract import WINDOW_COLUMN, WINDOW_TASKS, MimicExtract
from tests.tasks.roundtrip import TRACEBACK, ok, real_task, run_and_grade, sample_task

# Grading needs no numpy/pandas in the sandbox; without the preload a sandbox starts in a fraction of a second.
FAST = SandboxConfig(preload=[])


@pytest.fixture(scope="module")
def task(tmp_path_factory):
    return sample_task(MimicExtract, tmp_path_factory.mktemp("mimic_extract"))


def _inst(task, name):
    return next(i for i in task.load("test") if i.context["task_name"] == name)


def _labels(task, inst):
    return read_csv(task._labels(inst, "test"))


def _grade_file(task, inst, text, result=None):
    with create_sandbox(FAST, task.sandbox_spec(inst)) as sb:
        if text is not None:
            (sb.workspace / task.prediction_file(inst)).write_text(text)
        return task.grade(inst, result or ok(answer="'done'"), "", sb)


def _csv(header, rows):
    return header + "\n" + "".join(",".join(map(str, r)) + "\n" for r in rows)


def test_oracle_round_trip_on_sample(task):
    instances = task.load("test")
    assert len(instances) == 6 and {i.context["task_name"] for i in instances} >= set(WINDOW_TASKS)
    for inst in instances:
        result, verdict = run_and_grade(task, inst, task.oracle_code(inst))
        assert result.ok, result.stderr
        assert verdict.correct and verdict.score == 1.0, (inst.context, verdict)


def test_admission_task_golden_cases(task):
    inst = _inst(task, "mort_icu")
    labels = _labels(task, inst)
    gold = [(r["subject_id"], r["mort_icu"]) for r in labels]
    assert _grade_file(task, inst, _csv("subject_id,prediction", gold)).correct
    as_ints = [(s, int(v == "True")) for s, v in gold]
    assert _grade_file(task, inst, _csv("subject_id, prediction", as_ints)).correct
    flipped = [(s, 1 - v) for s, v in as_ints]
    assert _grade_file(task, inst, _csv("subject_id,prediction", flipped)).score == 0.0
    both = [(s, v) for s, _ in gold for v in ("True", "False")]
    assert _grade_file(task, inst, _csv("subject_id,prediction", both)).score == 0.0
    verdict = _grade_file(task, inst, _csv("subject_id,prediction", gold[:2]))
    assert not verdict.correct and verdict.score == pytest.approx(2 / len(gold))


def test_window_task_is_graded_per_window(task):
    inst = _inst(task, "vasopressor")
    labels = _labels(task, inst)
    gold = [(r["subject_id"], r[WINDOW_COLUMN], r["intervention_category"]) for r in labels]
    assert _grade_file(task, inst, _csv("subject_id,window_idx,prediction", gold)).correct
    # The label files' own column name is accepted too, in any row order.
    verdict = _grade_file(task, inst, _csv(f"subject_id,{WINDOW_COLUMN},prediction", gold[::-1]))
    assert verdict.correct
    # Right labels on the wrong windows are wrong (the original matched windows by position per patient).
    shifted = [(s, int(w) + 1, v) for s, w, v in gold]
    assert not _grade_file(task, inst, _csv("subject_id,window_idx,prediction", shifted)).correct
    verdict = _grade_file(task, inst, _csv("subject_id,prediction", [(s, v) for s, _, v in gold]))
    assert not verdict.correct and "window_idx" in verdict.reason


def test_reference_accuracy_is_the_default_bar(task):
    inst = _inst(task, "los_3")
    assert task.min_accuracy(inst) == inst.record["performance"]["ACC"]
    strict = sample_task(MimicExtract, task.data_dir.parent, success_accuracy=1.0)
    labels = _labels(task, inst)
    gold = [(r["subject_id"], r["los_3"]) for r in labels]
    one_wrong = [(gold[0][0], "False" if gold[0][1] == "True" else "True")] + gold[1:]
    assert _grade_file(task, inst, _csv("subject_id,prediction", one_wrong)).correct
    verdict = _grade_file(strict, inst, _csv("subject_id,prediction", one_wrong))
    assert not verdict.correct and "below the required accuracy" in verdict.reason


@pytest.mark.parametrize("answer", ["0", "1", "True", "", None])
def test_trivial_outputs_rejected(task, answer):
    verdict = _grade_file(task, _inst(task, "los_7"), None, result=ok(stdout=answer or "", answer=answer))
    assert not verdict.correct


def test_failed_execution_never_passes(task):
    inst = _inst(task, "mort_hosp")
    gold = [(r["subject_id"], r["mort_hosp"]) for r in _labels(task, inst)]
    assert not _grade_file(task, inst, _csv("subject_id,prediction", gold), result=TRACEBACK).correct


def test_prediction_file_named_in_the_workspace_and_labels_hidden(task):
    inst = _inst(task, "ventilation")
    assert "./predictions-ventilation.csv" in inst.goal and "cache" not in inst.goal
    spec = task.sandbox_spec(inst)
    hidden = {str(p.relative_to(task.data_dir)) for p in spec.hidden_paths}
    readable = {str(p.relative_to(task.data_dir)) for p in spec.readonly_paths}
    assert "vasopressor_ventilation/test_ventilation_labels.csv" in hidden and "test_tasks.jsonl" in hidden
    assert not any("test_" in r and r.endswith("_labels.csv") for r in readable)
    assert {"vasopressor_ventilation/X_static_test.pkl", "mortality_los/train_los_3_labels.csv"} <= readable


def test_real_task_file_conformance():
    real = real_task(MimicExtract)
    rows = real.read_records("test")
    assert len(rows) == 6 and real.read_records("train") == rows
    for i, rec in enumerate(rows):
        inst = real.make_instance("test", i, rec)
        assert set(rec["performance"]) >= {"ACC"} and real.min_accuracy(inst) == rec["performance"]["ACC"]
        folder = "vasopressor_ventilation" if rec["task_name"] in WINDOW_TASKS else "mortality_los"
        assert inst.context["folder"] == folder
        assert str(real.data_dir / folder / f"train_{rec['task_name']}_labels.csv") in inst.goal
    assert set(real.required_files("test")) >= {"mortality_los/X_lab_val.pkl", "vasopressor_ventilation/X_static_test.pkl"}


@pytest.mark.parametrize("bar", ["high", 1.5, -0.1])
def test_a_bad_success_bar_is_a_clear_config_error(task, bar):
    with pytest.raises(UserError, match="success_accuracy"):
        sample_task(MimicExtract, task.data_dir.parent, success_accuracy=bar)


def test_agent_code_cannot_read_the_test_labels(task):
    inst = _inst(task, "ventilation")
    with create_sandbox(FAST, task.sandbox_spec(inst)) as sb:
        assert sb.run_python(f"import pandas; print(len(pandas.read_csv({str(task._labels(inst, 'train'))!r})))").ok
        assert not sb.run_python(f"print(open({str(task._labels(inst, 'test'))!r}).read())").ok
