"""eICU (EHRSQL): golden grader cases, sample oracle round trip, real-file conformance."""

from __future__ import annotations

import sqlite3

import pytest

from medagentgym.tasks.ehrsql import uses_current_time
from medagentgym.tasks.eicu import Eicu
from tests.tasks.ehrsql_checks import (
    assert_adversarial_rejected,
    assert_oracle_round_trip,
    pass_rates,
    real_instances,
)
from tests.tasks.roundtrip import ok, real_task, sample_task


@pytest.fixture(scope="module")
def task(tmp_path_factory):
    return sample_task(Eicu, tmp_path_factory.mktemp("data"))


def test_oracle_round_trip(task):
    insts = assert_oracle_round_trip(task)
    assert "patient.csv" in insts[0].goal  # eICU CSVs keep the lower-case table names


def test_golden_cases(task):
    inst = next(i for i in task.load("test") if "intake method" in i.record["template"])
    gold = inst.record["answer"]
    assert task.grade(inst, ok(answer=repr([(g,) for g in gold])), "", None).correct
    assert not task.grade(inst, ok(answer=repr(gold[1:])), "", None).correct
    con = sqlite3.connect(task.db_path)
    assert_adversarial_rejected(task, inst, [r[0] for r in con.execute("select distinct routeadmin from medication")]
                                + ["iv push"])


def test_request_info_on_eicu_tables(task):
    assert "routeadmin" in task.request_info({"info_type": "column_names", "keyterm": "medication"})
    assert "medication.drugname: 'labetalol'" in task.request_info({"info_type": "term", "keyterm": "labetolol"})


def test_real_files_conform():
    task = real_task(Eicu)
    for split, n in (("test", 611), ("train", 560)):  # metadata.json: 610 / 559
        assert len(real_instances(task, split)) == n
    insts = real_instances(task, "test")
    assert all(task.grade(i, ok(answer=repr(i.record["answer"])), "", None).correct for i in insts)
    rates = pass_rates(task, insts, "answer")
    assert rates["sql traceback"][0] == rates["pandas traceback"][0] == 0.0
    assert all(ours <= theirs for ours, theirs in rates.values())
    relative = [i for i in insts if uses_current_time(i.record["query"])]
    assert len(relative) == sum("current_time" in i.record["query"] for i in insts) > 100
