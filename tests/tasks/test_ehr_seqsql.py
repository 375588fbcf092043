"""EHR-SeqSQL: golden grader cases and the sample oracle round trip (no public task file exists)."""

from __future__ import annotations

import pytest

from medagentgym.tasks.ehr_seqsql import EhrSeqSql
from medagentgym.types import TaskInstance
from tests.tasks.ehrsql_checks import assert_adversarial_rejected, assert_oracle_round_trip
from tests.tasks.roundtrip import ok, sample_task


@pytest.fixture(scope="module")
def task(tmp_path_factory):
    return sample_task(EhrSeqSql, tmp_path_factory.mktemp("data"))


def test_oracle_round_trip(task):
    insts = assert_oracle_round_trip(task)
    assert all("Earlier in this conversation" in i.goal for i in insts)


def test_gold_from_ans_field_without_query(task):
    # A row without SQL: the oracle submits the gold list itself, and the grader reads `ans`.
    inst = TaskInstance("ehr_seqsql", "test", 0, "0", "g", record={"seed_question": "s", "question": "q",
                                                                  "ans": [12, "po"]})
    assert task.grade(inst, ok(answer=repr(["PO", 12.0])), "", None).correct
    assert not task.grade(inst, ok(answer=repr(["po"])), "", None).correct
    # The original passed any run whose output was not a list; here every trivial output fails.
    assert_adversarial_rejected(task, inst, [12, "po", "iv", 1, 2])
    assert "answer = [12, 'po']" in task.oracle_code(inst)


def test_unusable_gold_is_an_invalid_task(task):
    inst = TaskInstance("ehr_seqsql", "test", 0, "0", "g", record={"question": "q", "ans": "12"})
    assert task.grade(inst, ok(answer="12"), "", None).status == "invalid_task"

