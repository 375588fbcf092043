import json
import os

import pytest

from medagentgym.runner.records import EpisodeRecord, EpisodeWriter, iter_records, latest_by_key
from medagentgym.runner.summary import pass_at_k, summarize, wilson_interval


def rec(index, status, rollout=0, score=None):
    return EpisodeRecord(task="t", split="test", index=index, rollout=rollout, task_id=str(index), model="m",
                         temperature=0.0, messages=[], steps=[],
                         outcome={"status": status, "score": float(status == "success") if score is None else score,
                                  "reason": ""},
                         loop=False, usage={"prompt_tokens": 3, "completion_tokens": 2, "cost": 0.5},
                         timings={"wall_s": 1.0}, config_hash="h")


def test_pass_at_k_estimator():
    assert pass_at_k(5, 2, 1) == pytest.approx(0.4)
    assert pass_at_k(5, 2, 2) == pytest.approx(1 - 3 / 10)
    assert pass_at_k(5, 0, 3) == 0.0 and pass_at_k(5, 3, 3) == 1.0


def test_wilson_interval_contains_rate():
    lo, hi = wilson_interval(17, 20)
    assert lo < 0.85 < hi and 0.6 < lo and hi < 0.97
    assert wilson_interval(0, 0) == (0.0, 0.0)


def test_infra_failures_are_excluded_from_the_denominator():
    recs = [rec(0, "success"), rec(1, "wrong_answer"), rec(2, "llm_error"), rec(3, "sandbox_error"),
            rec(4, "grader_error"), rec(5, "invalid_task"), rec(6, "parse_failure")]
    s = summarize(recs)
    assert s["n_episodes"] == 7 and s["n_graded"] == 3 and s["n_excluded"] == 4
    assert s["success_rate"] == pytest.approx(1 / 3)
    assert s["outcomes"]["llm_error"] == 1 and s["cost"] == pytest.approx(3.5)


def test_pass_at_k_in_summary():
    recs = [rec(0, "success", 0), rec(0, "wrong_answer", 1), rec(1, "wrong_answer", 0), rec(1, "wrong_answer", 1)]
    s = summarize(recs, num_rollouts=2)
    assert s["pass_at_k"]["1"] == pytest.approx(0.25) and s["pass_at_k"]["2"] == pytest.approx(0.5)


def test_writer_appends_whole_lines_and_repairs_a_torn_tail(tmp_path):
    w = EpisodeWriter(tmp_path)
    w.write(rec(0, "success"))
    w.close()
    with open(tmp_path / "episodes.jsonl", "ab") as fh:
        fh.write(b'{"task": "t", "index": 1, "trunc')  # a crash mid-record
    assert [r.index for r in iter_records(tmp_path / "episodes.jsonl")] == [0]
    w = EpisodeWriter(tmp_path)
    w.write(rec(1, "success"))
    w.close()
    lines = (tmp_path / "episodes.jsonl").read_bytes().splitlines()
    assert [json.loads(x)["index"] for x in lines] == [0, 1]


def test_latest_record_supersedes_a_retried_infra_failure(tmp_path):
    w = EpisodeWriter(tmp_path)
    for r in (rec(0, "llm_error"), rec(1, "success"), rec(0, "success")):
        w.write(r)
    w.close()
    latest = latest_by_key(iter_records(tmp_path / "episodes.jsonl"))
    assert {k: v.status for k, v in latest.items()} == {(0, 0): "success", (1, 0): "success"}


def test_concurrent_writers_never_interleave(tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    w = EpisodeWriter(tmp_path)
    big = rec(0, "success")
    big.messages = [{"role": "user", "content": "x" * 200_000}]
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda i: w.write(big), range(40)))
    w.close()
    assert len(list(iter_records(tmp_path / "episodes.jsonl"))) == 40
    assert os.path.getsize(tmp_path / "episodes.jsonl") > 40 * 200_000
