"""MIMIC-III (EHRSQL): golden grader cases, sample oracle round trip, request_info, real-file conformance.

The shared EHR SQL machinery (ehrsql.py, lookup.py) is exercised most thoroughly here; the sibling
task tests cover what differs per dataset.
"""

from __future__ import annotations

import sqlite3

import pytest

from medagentgym.errors import DataMissingError, TaskFileError, UserError
from medagentgym.tasks.ehr_sample import SAMPLE_NOW
from medagentgym.tasks.ehrsql import uses_current_time
from medagentgym.tasks.mimic_iii import MimicIII
from medagentgym.types import TaskInstance
from tests.tasks.ehrsql_checks import (
    assert_adversarial_rejected,
    assert_oracle_round_trip,
    pass_rates,
    read_jsonl,
    real_instances,
)
from tests.tasks.roundtrip import ok, real_task, run_and_grade, sample_task, task_config


@pytest.fixture(scope="module")
def task(tmp_path_factory):
    return sample_task(MimicIII, tmp_path_factory.mktemp("data"))


def by_question(task, fragment: str) -> TaskInstance:
    return next(i for i in task.load("test") if fragment in i.record["template"])


def test_oracle_round_trip(task):
    insts = assert_oracle_round_trip(task)
    assert any(uses_current_time(i.record["query"]) for i in insts)


def test_gold_accepted_in_every_shape(task):
    inst = by_question(task, "intake method")
    gold = inst.record["answer"]
    assert len(gold) > 1
    assert task.grade(inst, ok(answer=repr(list(reversed(gold)))), "", None).correct
    assert task.grade(inst, ok(answer=repr([(g.upper(),) for g in gold])), "", None).correct
    assert task.grade(inst, ok(stdout=f"{gold!r}\n"), "", None).correct


def test_wrong_and_adversarial_rejected(task):
    inst = by_question(task, "intake method")
    gold = inst.record["answer"]
    assert not task.grade(inst, ok(answer=repr(gold[:-1])), "", None).correct
    assert not task.grade(inst, ok(answer=repr(gold + ["im"])), "", None).correct
    con = sqlite3.connect(task.db_path)
    every_drug_and_route = [v for row in con.execute("select drug, route from prescriptions") for v in row]
    assert_adversarial_rejected(task, inst, every_drug_and_route)


def test_yes_no_question_accepts_booleans(task):
    inst = by_question(task, "this year")
    gold = inst.record["answer"][0]
    assert task.grade(inst, ok(answer=repr(gold == "1")), "", None).correct
    assert not task.grade(inst, ok(answer=repr(gold != "1")), "", None).correct
    # Elsewhere True is not 1: a count of one is not a yes.
    count = by_question(task, "how many patients")
    assert not task.grade(count, ok(answer="True"), "", None).correct


def test_explicit_now_is_stated_and_used(task):
    inst = by_question(task, "days have passed")
    assert SAMPLE_NOW in inst.goal and SAMPLE_NOW in task.oracle_code(inst)
    assert "current_time" not in task.oracle_code(inst)
    # The same question against SQLite's clock gives a different (wall-clock) answer: the now matters.
    result, verdict = run_and_grade(task, inst, task.oracle_code(inst).replace(f"'{SAMPLE_NOW}'", "current_time"))
    assert result.ok and not verdict.correct


def test_now_option_overrides_the_sample_file(task):
    other = MimicIII(task_config("mimic_iii", now="2106-01-31 00:00:00"), task.data_dir)
    inst = by_question(other, "days have passed")
    assert "2106-01-31 00:00:00" in inst.goal
    assert not other.grade(inst, run_and_grade(other, inst, other.oracle_code(inst))[0], "", None).correct


def test_malformed_now_is_a_clear_error(task):
    with pytest.raises(UserError, match="YYYY-MM-DD HH:MM:SS"):
        MimicIII(task_config("mimic_iii", now="yesterday'; drop table x"), task.data_dir)


def test_goal_points_at_database_and_csvs_but_hides_gold(task):
    inst = task.load("test")[0]
    assert str(task.db_path) in inst.goal and "PATIENTS.csv" in inst.goal
    assert all(str(g) not in inst.goal for g in inst.record["answer"] if len(str(g)) > 2)
    spec = task.sandbox_spec(inst)
    assert task.db_path in spec.readonly_paths and task.data_dir / "ADMISSIONS.csv" in spec.readonly_paths
    assert task.data_dir / "valid_tasks.jsonl" in spec.hidden_paths


def test_missing_data_names_the_files(tmp_path):
    with pytest.raises(DataMissingError) as err:
        MimicIII(task_config("mimic_iii"), tmp_path).load("test")
    assert "valid_tasks.jsonl" in str(err.value) and "mimic_iii.db" in str(err.value)


def test_malformed_row_is_a_clear_error(task):
    with pytest.raises(TaskFileError, match="template"):
        task.make_instance("test", 0, {"question": "q", "answer": ["1"]})
    bad_gold = TaskInstance("mimic_iii", "test", 0, "0", "g", record={"answer": "1", "query": "select 1"})
    assert task.grade(bad_gold, ok(answer="1"), "", None).status == "invalid_task"


def test_request_info(task):
    assert "subject_id" in task.request_info({"info_type": "column_names", "keyterm": "ADMISSIONS.csv"})
    values = task.request_info({"info_type": "column_values", "keyterm": "prescriptions.route"})
    assert "po" in values and "distinct values" in values
    found = task.request_info({"info_type": "term", "keyterm": "furosemid"})
    assert "prescriptions.drug: 'furosemide'" in found
    assert "patients.gender" not in found  # one-letter values inside the term are not matches
    assert "No value close" in task.request_info({"info_type": "term", "keyterm": "qqqzzzxxx"})
    assert "Unknown info_type" in task.request_info({"info_type": "schema", "keyterm": "x"})
    assert (task.data_dir / ".request_info" / "mimic_iii.db.index.pkl").is_file()


# ---- conformance on the real files ----------------------------------------------------------------------
def test_real_files_load_with_expected_counts_and_fields():
    task = real_task(MimicIII)
    for split, n in (("test", 581), ("train", 553)):  # metadata.json says 581 / 552 (its off-by-one)
        insts = real_instances(task, split)
        assert len(insts) == n
        assert all(isinstance(i.record["answer"], list) and i.record["query"] for i in insts)
        assert len({i.task_id for i in insts}) == n


def test_real_gold_accepted_and_trivial_outputs_measured():
    task = real_task(MimicIII)
    insts = real_instances(task, "test")
    assert all(task.grade(i, ok(answer=repr(i.record["answer"])), "", None).correct for i in insts)
    rates = pass_rates(task, insts, "answer")
    assert rates["sql traceback"][0] == rates["pandas traceback"][0] == 0.0
    assert all(ours <= theirs for ours, theirs in rates.values())
    assert rates["pandas traceback"][1] > 0.2  # the original passes a fifth of the set on a crash


def test_real_relative_time_items_counted():
    rows = read_jsonl(real_task(MimicIII).data_dir / "valid_tasks.jsonl")
    relative = [r for r in rows if uses_current_time(r["query"])]
    since_admission = [r for r in relative if "strftime('%j',current_time)" in r["query"]]
    assert len(relative) == 166 and len(since_admission) == 38
