"""EHRCon: strict boolean grading, sample oracle round trip, real-file conformance and contradictions."""

from __future__ import annotations

import csv
import sqlite3
from collections import defaultdict

import pytest

from medagentgym.tasks.ehrcon import EhrCon, admission_id
from medagentgym.types import TaskInstance
from tests.tasks.ehrsql_checks import (
    PANDAS_TRACEBACK,
    SQL_TRACEBACK,
    as_run,
    assert_oracle_round_trip,
    failed,
    real_instances,
)
from tests.tasks.roundtrip import TRACEBACK, ok, real_task, sample_task


@pytest.fixture(scope="module")
def task(tmp_path_factory):
    return sample_task(EhrCon, tmp_path_factory.mktemp("data"))


def inst(gold) -> TaskInstance:
    rec = {"Hospital admission": "127294.0", "Medical entity": "INR", "Number of inconsistencies": 1,
           "Has error": gold, "split": "test"}
    return TaskInstance("ehrcon", "test", 0, "0", "g", record=rec)


@pytest.mark.parametrize(
    ("result", "gold", "expected"),
    [
        (ok(answer="True"), True, True),
        (ok(answer="False"), False, True),
        (ok(stdout="True\n"), True, True),  # the last printed line, when `answer` is unset
        (ok(answer="False"), True, False),
        (ok(answer="1"), True, False),  # strict: a boolean, not a number
        (ok(answer="'true'"), True, False),
        (ok(stdout="there is no inconsistency, so True is wrong\n"), False, False),  # "true" inside text
        (ok(answer="[True, False]"), True, False),
        (ok(stdout=""), False, False),
        (ok(stdout="0\n"), False, False),
        (TRACEBACK, False, False),
        (failed(SQL_TRACEBACK), True, False),
    ],
)
def test_strict_boolean(task, result, gold, expected):
    assert task.grade(inst(gold), result, "", None).correct is expected


def test_non_boolean_gold_is_an_invalid_task(task):
    assert task.grade(inst("true"), ok(answer="True"), "", None).status == "invalid_task"


def test_oracle_round_trip_and_both_labels(task):
    insts = assert_oracle_round_trip(task)
    labels = {i.record["Has error"] for i in insts}
    assert labels == {True, False}
    assert "clinical_notes.csv" in insts[0].goal and ".0" not in insts[0].goal.split("hadm_id")[1][:12]
    spec = task.sandbox_spec(insts[0])
    assert task.data_dir / "clinical_notes.csv" in spec.readonly_paths
    assert task.data_dir / "test_tasks.jsonl" in spec.hidden_paths


def test_sample_gold_matches_the_notes(task):
    """The sample gold is derived from the data: a misstated note value is exactly a 'Has error' row."""
    with open(task.data_dir / "clinical_notes.csv", newline="") as fh:
        notes = {row["HADM_ID"]: row["TEXT"] for row in csv.DictReader(fh)}
    con = sqlite3.connect(task.db_path)
    for i in task.load("test"):
        hadm, label = admission_id(i.record["Hospital admission"]), i.record["Medical entity"]
        values = {v for (v,) in con.execute(
            "select valuenum from labevents join d_labitems using (itemid) where hadm_id = ? and label = ?",
            (int(hadm), label))}
        stated = float(notes[hadm].split(f"{label} of ")[1].split(" ")[0].rstrip("."))
        assert (stated not in values) is i.record["Has error"]


def test_real_files_conform_and_contradictions_counted():
    task = real_task(EhrCon)
    for split, n in (("test", 976), ("train", 1000)):  # metadata.json: 500 / 1000
        insts = real_instances(task, split)
        assert len(insts) == n
        assert all(isinstance(i.record["Has error"], bool) for i in insts)
        assert all((i.record["Number of inconsistencies"] > 0) is i.record["Has error"] for i in insts)
        assert all(task.grade(i, ok(answer=repr(i.record["Has error"])), "", None).correct for i in insts)
    labels = defaultdict(set)
    for i in real_instances(task, "test"):
        labels[(i.record["Hospital admission"], i.record["Medical entity"])].add(i.record["Has error"])
    assert sum(len(v) > 1 for v in labels.values()) == 33  # same admission and entity, both labels
    insts = real_instances(task, "test")
    for output in (SQL_TRACEBACK, PANDAS_TRACEBACK, "0"):
        assert not any(task.grade(i, as_run(output), "", None).correct for i in insts)
    true_rate = sum(task.grade(i, as_run("True"), "", None).correct for i in insts) / len(insts)
    assert true_rate == sum(i.record["Has error"] for i in insts) / len(insts)
