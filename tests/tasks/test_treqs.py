"""TREQS: golden grader cases (multi-column rows), sample oracle round trip, real-file conformance."""

from __future__ import annotations

import pytest

from medagentgym.tasks.treqs import Treqs
from tests.tasks.ehrsql_checks import (
    assert_adversarial_rejected,
    assert_oracle_round_trip,
    pass_rates,
    real_instances,
)
from tests.tasks.roundtrip import ok, real_task, sample_task


@pytest.fixture(scope="module")
def task(tmp_path_factory):
    return sample_task(Treqs, tmp_path_factory.mktemp("data"))


def test_oracle_round_trip(task):
    insts = assert_oracle_round_trip(task)
    assert all("current time" not in i.goal for i in insts)  # TREQS has no relative-time questions


def test_multi_column_answers(task):
    inst = next(i for i in task.load("test") if "admission time and procedure" in i.record["question"])
    admit, title = inst.record["answer"][:2]
    assert task.grade(inst, ok(answer=repr([(admit, title.upper())])), "", None).correct
    assert not task.grade(inst, ok(answer=repr([admit])), "", None).correct
    assert_adversarial_rejected(task, inst, [admit, title, "hemodialysis", "2101-01-01 00:00:00"])


def test_counts_compare_numerically(task):
    inst = next(i for i in task.load("test") if "born before" in i.record["question"])
    n = int(inst.record["answer"][0])
    assert task.grade(inst, ok(answer=repr(float(n))), "", None).correct
    assert not task.grade(inst, ok(answer=repr(n * 10 + n)), "", None).correct
    assert not task.grade(inst, ok(answer="True"), "", None).correct


def test_real_files_conform():
    task = real_task(Treqs)
    for split, n in (("test", 996), ("train", 898)):  # metadata.json: 995 / 897
        insts = real_instances(task, split)
        assert len(insts) == n and all(i.record["query"] for i in insts)
    insts = real_instances(task, "test")
    assert all(task.grade(i, ok(answer=repr(i.record["answer"])), "", None).correct for i in insts)
    rates = pass_rates(task, insts, "answer")
    assert rates["sql traceback"][0] == rates["pandas traceback"][0] == 0.0
    assert all(ours <= theirs for ours, theirs in rates.values())
