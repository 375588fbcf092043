"""build-sft-data on records written with the runner's EpisodeWriter: filters, pairs, splits, files, report."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from medagentgym.errors import UserError
from medagentgym.training.episodes import Filters, load_episodes, select_failures, select_successes
from medagentgym.training.export import ExportSpec, export
from medagentgym.training.pairs import PairSpec, build_pairs, split_at_divergence

from .support import episode, write_run


def test_filters_count_what_they_remove(tmp_path):
    recs = [
        episode(0, 0, "success"),
        episode(0, 1, "success"),  # same messages as rollout 0: a duplicate
        episode(1, 0, "success", loop=True),
        episode(2, 0, "success", parse_failure=True),
        episode(3, 0, "success", answers=["a = 1", "a = 2", "answer = 3"]),
        episode(4, 0, "success", score=0.5),
        episode(5, 0, "wrong_answer"),
        episode(6, 0, "llm_error"),
    ]
    kept, removed = select_successes(recs, Filters(max_steps=2))
    assert [(t.record.index, t.record.rollout) for t in kept] == [(0, 0)]
    assert removed == {"duplicate": 1, "loop": 1, "parse_failure": 1, "too_many_steps": 1, "low_score": 1,
                       "not_success": 2}
    kept, _ = select_successes(recs, Filters(min_score=0.5, drop_loops=False, dedupe=False))
    assert sorted(t.record.index for t in kept) == [0, 0, 1, 3, 4]


def test_trailing_observation_is_dropped_and_content_is_a_string(tmp_path):
    rec = episode(0, 0, "success")
    rec.messages.append({"role": "user", "content": None, "name": "extra"})
    [t], _ = select_successes([rec], Filters())
    assert t.messages[-1]["role"] == "assistant"
    assert all(set(m) == {"role", "content"} and isinstance(m["content"], str) for m in t.messages)


def test_pairs_share_history_up_to_the_first_different_reply():
    good = episode(0, 0, "success", answers=["x = 1", "answer = 2"])
    bad = episode(0, 1, "wrong_answer", answers=["x = 1", "answer = 9", "answer = 8"])
    prompt, chosen, rejected = split_at_divergence(
        select_successes([good], Filters())[0][0].messages, select_failures([bad])[0].messages)
    assert [m["role"] for m in prompt] == ["system", "user", "assistant", "user"]
    assert chosen[0]["role"] == rejected[0]["role"] == "assistant"
    assert "answer = 2" in chosen[0]["content"] and "answer = 9" in rejected[0]["content"]
    assert [m["role"] for m in rejected] == ["assistant", "user", "assistant"]


def test_pairing_strategies_and_limits():
    goods = select_successes([episode(0, r, "success", answers=[f"answer = {r}"]) for r in range(3)],
                             Filters())[0]
    bads = select_failures([episode(0, 10 + r, "wrong_answer", answers=[f"answer = {-r - 1}"]) for r in range(2)]
                           + [episode(1, 0, "wrong_answer")])
    rows, dropped = build_pairs(goods, bads, PairSpec("all", None))
    assert len(rows) == 6 and dropped["over_limit"] == 0
    rows, dropped = build_pairs(goods, bads, PairSpec("all", 4))
    assert len(rows) == 4 and dropped["over_limit"] == 2
    rows, _ = build_pairs(goods, bads, PairSpec("zip", None))
    assert len(rows) == 2 and len({r["chosen_rollout"] for r in rows}) == 2
    assert all(r["task"] == "medcalcbench" and r["index"] == 0 and r["rejected_status"] == "wrong_answer" for r in rows)
    with pytest.raises(UserError, match="pairing"):
        build_pairs(goods, bads, PairSpec("best", None))


def test_export_writes_verl_parquet_openrlhf_jsonl_and_report(tmp_path):
    oracle = write_run(tmp_path / "sweep" / "0_oracle", [episode(i, 0, "success", model="oracle") for i in range(10)])
    weak = [episode(i, 0, "wrong_answer", answers=["answer = -1"], model="weak") for i in range(10)]
    write_run(tmp_path / "sweep" / "1_weak", weak + [episode(0, 1, "sandbox_error", model="weak")])
    out = tmp_path / "out"
    report = export([str(tmp_path / "sweep")], out, ExportSpec(val_fraction=0.2, seed=3))

    train = pq.read_table(out / "sft" / "train.parquet")
    val = pq.read_table(out / "sft" / "val.parquet")
    assert train.num_rows == 8 and val.num_rows == 2
    assert set(train.column_names) >= {"messages", "task", "index", "rollout", "model", "run"}
    assert not set(train.column("index").to_pylist()) & set(val.column("index").to_pylist())
    row = train.slice(0, 1).to_pylist()[0]
    assert [m["role"] for m in row["messages"]] == ["system", "user", "assistant"]
    assert row["run"] == oracle.name and row["model"] == "oracle"

    pairs = [json.loads(line) for line in (out / "dpo" / "train.jsonl").read_text().splitlines()]
    assert len(pairs) + report["dpo"]["val_rows"] == 10
    p = pairs[0]
    assert p["prompt"][-1]["role"] == "user" and p["chosen"][0]["role"] == "assistant"
    assert p["chosen_model"] == "oracle" and p["rejected_model"] == "weak"
    on_disk = json.loads((out / "report.json").read_text())
    assert on_disk == report
    assert report["episodes"] == 21 and report["statuses"]["sandbox_error"] == 1
    assert report["sft"]["per_task"] == {"medcalcbench": 10} and report["sft"]["est_tokens"] > 0


def test_first_n_keeps_a_seeded_random_subset(tmp_path):
    write_run(tmp_path / "run", [episode(i, 0, "success") for i in range(20)])

    def pick(seed: int, name: str) -> list[int]:
        report = export([str(tmp_path / "run")], tmp_path / name,
                        ExportSpec(first_n=5, val_fraction=0.0, seed=seed, dpo=False))
        assert report["sft"]["train_rows"] == 5 and report["removed"]["beyond_first_n"] == 15
        return pq.read_table(tmp_path / name / "sft" / "train.parquet").column("index").to_pylist()

    first = pick(1, "a")
    assert first == sorted(first) and pick(1, "b") == first
    assert any(pick(seed, f"s{seed}") != first for seed in range(2, 6))


def test_latest_record_per_key_wins_and_bad_inputs_are_user_errors(tmp_path):
    write_run(tmp_path / "run", [episode(0, 0, "llm_error"), episode(0, 0, "success")])
    assert [r.status for r in load_episodes([tmp_path / "run"])] == ["success"]
    with pytest.raises(UserError, match="not a directory"):
        load_episodes([tmp_path / "nope"])
    (tmp_path / "empty").mkdir()
    with pytest.raises(UserError, match="episodes.jsonl"):
        load_episodes([tmp_path / "empty"])
