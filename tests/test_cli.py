"""The entry point as users run it: a subprocess per command, a scripted server for the model."""

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from medagentgym.llm.scripted_server import Reply, answer_from_goal, flaky
from medagentgym.types import STATUSES
from tests.conftest import TEST_CONF, cli_env, model_args, run_cli


def lines(run_dir: Path) -> list[dict]:
    raw = (run_dir / "episodes.jsonl").read_bytes()
    assert raw.endswith(b"\n")
    return [json.loads(x) for x in raw.splitlines()]


def test_no_model_prints_the_plus_model_paragraph(tmp_path, sample_root):
    p = run_cli([], tmp_path, sample_root, test_tasks=False)
    assert p.returncode != 0
    assert "+model=" in p.stderr and "oracle" in p.stderr and "gpt_4_1_mini" in p.stderr
    assert "Traceback" not in p.stderr + p.stdout
    assert not list((tmp_path / "outputs" / "runs").glob("*"))  # no empty run dir left behind


@pytest.mark.parametrize("args, fragment", [
    (["+model=nope"], "Could not find 'model/nope'"),
    (["+model=oracle", "task=nope"], "Could not find 'task/nope'"),
    (["+model=oracle", "env.num_stepz=3"], "num_stepz"),
    (["+model=oracle", "run.num_rollouts=many"], "num_rollouts"),
    (["+model=oracle", "task=arith", "data.root=/nonexistent/place"], "missing test_tasks.jsonl"),
    (["+model=gpt_4o", "task=arith", "data=sample"], "OPENAI_API_KEY"),
])
def test_bad_input_is_one_clear_message(tmp_path, sample_root, args, fragment):
    p = run_cli(args, tmp_path, sample_root, env_extra={"OPENAI_API_KEY": ""})
    assert p.returncode != 0
    assert fragment in p.stderr
    assert "Traceback" not in p.stderr + p.stdout


def test_oracle_run_writes_trustworthy_results(tmp_path, sample_root):
    p = run_cli(["+model=oracle", "task=arith", "data=sample", "hydra.run.dir=run"], tmp_path, sample_root)
    assert p.returncode == 0, p.stderr
    run = tmp_path / "run"
    summary = json.loads((run / "summary.json").read_text())
    assert summary["success_rate"] == 1.0 and summary["n_episodes"] == 10
    assert {r["index"] for r in lines(run)} == set(range(10))
    assert (run / ".hydra" / "config.yaml").exists() and (run / "run.log").exists()
    assert "success rate" in p.stdout


def test_default_run_dir_layout(tmp_path, sample_root):
    p = run_cli(["+model=oracle", "task=arith", "data=sample", "run.end_idx=2"], tmp_path, sample_root)
    assert p.returncode == 0, p.stderr
    (run,) = (tmp_path / "outputs" / "runs").iterdir()
    assert run.name.endswith("_oracle_arith")


@pytest.mark.parametrize("hydra_launcher", [[], ["hydra/launcher=joblib", "hydra.launcher.n_jobs=2"]],
                         ids=["basic", "joblib_plugin"])
def test_sweep_2x2_writes_one_dir_per_cell_and_the_table(tmp_path, sample_root, scripted_server, hydra_launcher):
    srv = scripted_server(answer_from_goal)
    p = run_cli(["-m", "+model=oracle,scripted", "task=arith,arith_b", "data=sample", "run.end_idx=3",
                 *hydra_launcher], tmp_path, sample_root, env_extra={"SCRIPTED_LLM_URL": srv.url})
    assert p.returncode == 0, p.stderr
    (sweep,) = (tmp_path / "outputs" / "sweeps").iterdir()
    cells = sorted(d.name for d in sweep.iterdir() if d.is_dir() and not d.name.startswith("."))
    assert cells == ["0_oracle_arith", "1_oracle_arith_b", "2_scripted_arith", "3_scripted_arith_b"]
    rows = list(csv.DictReader(open(sweep / "results.csv")))
    assert {(r["model"], r["task"]) for r in rows} == {("oracle", "arith"), ("oracle", "arith_b"),
                                                       ("scripted", "arith"), ("scripted", "arith_b")}
    assert {r["run_dir"].rsplit("/", 1)[-1] for r in rows} == set(cells)
    assert all(float(r["success_rate"]) == 1.0 for r in rows)
    md = (sweep / "results.md").read_text()
    assert "| model | arith | arith_b |" in md


def test_sweep_records_a_failing_job_and_still_writes_the_table(tmp_path, sample_root):
    p = run_cli(["-m", "+model=oracle", "task=arith", "data=real", "data.root=/nonexistent,"
                 + str(sample_root)], tmp_path, sample_root)
    assert p.returncode == 0 and "Traceback" not in p.stderr  # the failed cell is recorded, not raised
    (sweep,) = (tmp_path / "outputs" / "sweeps").iterdir()
    table = (sweep / "results.csv").read_text()
    assert "missing test_tasks.jsonl" in table


def test_kill_9_then_resume_gives_exactly_the_requested_episodes(tmp_path, sample_root, scripted_server):
    srv = scripted_server(answer_from_goal, latency=0.3)
    args = model_args(srv.url) + ["task=arith", "data=sample", "launcher=joblib", "launcher.n_jobs=2",
                                  "hydra.run.dir=run", f"hydra.searchpath=[file://{TEST_CONF}]"]
    proc = subprocess.Popen([sys.executable, "-m", "medagentgym", *args], cwd=tmp_path,
                            env=cli_env(tmp_path, sample_root), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    episodes = tmp_path / "run" / "episodes.jsonl"
    deadline = time.time() + 60
    while time.time() < deadline and (not episodes.exists() or episodes.read_bytes().count(b"\n") < 3):
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    before = lines(tmp_path / "run")
    assert 3 <= len(before) < 10
    p = run_cli(args, tmp_path, sample_root, test_tasks=False)
    assert p.returncode == 0, p.stderr
    after = lines(tmp_path / "run")
    keys = [(r["index"], r["rollout"]) for r in after]
    assert sorted(keys) == [(i, 0) for i in range(10)]  # nothing lost, nothing duplicated
    assert after[: len(before)] == before
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["success_rate"] == 1.0


def test_infra_failures_are_excluded_then_retried_on_resume(tmp_path, sample_root, scripted_server):
    down = scripted_server(lambda body: Reply(status=500))
    p = run_cli(model_args(down.url, n_retry=1) + ["task=arith", "data=sample", "run.end_idx=4",
                                                   "hydra.run.dir=run"], tmp_path, sample_root)
    assert p.returncode == 0, p.stderr
    s = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert s["outcomes"]["llm_error"] == 4 and s["n_graded"] == 0 and s["success_rate"] is None
    up = scripted_server(answer_from_goal)
    p = run_cli(model_args(up.url, n_retry=1) + ["task=arith", "data=sample", "run.end_idx=4",
                                                 "hydra.run.dir=run"], tmp_path, sample_root)
    assert p.returncode == 0, p.stderr
    s = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert s["outcomes"]["success"] == 4 and s["outcomes"]["llm_error"] == 0 and s["success_rate"] == 1.0
    assert len(lines(tmp_path / "run")) == 8


def test_server_failing_30_percent_still_classifies_every_episode(tmp_path, sample_root, scripted_server):
    srv = scripted_server(flaky(answer_from_goal, 0.3, seed=3))
    p = run_cli(model_args(srv.url, n_retry=3) + ["task=arith", "data=sample", "run.num_rollouts=2",
                                                  "launcher=joblib", "launcher.n_jobs=4", "hydra.run.dir=run"],
                tmp_path, sample_root)
    assert p.returncode == 0, p.stderr
    recs = lines(tmp_path / "run")
    assert sorted((r["index"], r["rollout"]) for r in recs) == [(i, k) for i in range(10) for k in range(2)]
    assert all(r["outcome"]["status"] in STATUSES for r in recs)
    statuses = {r["outcome"]["status"] for r in recs}
    assert statuses <= {"success", "llm_error"} and "success" in statuses
    s = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert "pass_at_k" in s and s["success_rate"] == 1.0


def test_resume_refuses_a_different_configuration(tmp_path, sample_root, scripted_server):
    srv = scripted_server(answer_from_goal)
    assert run_cli(["+model=oracle", "task=arith", "data=sample", "run.end_idx=2", "hydra.run.dir=run"],
                   tmp_path, sample_root).returncode == 0
    p = run_cli(model_args(srv.url) + ["task=arith", "data=sample", "run.end_idx=2", "hydra.run.dir=run"],
                tmp_path, sample_root)
    assert p.returncode != 0 and "different configuration" in p.stderr and "model" in p.stderr
    assert "Traceback" not in p.stderr


def test_api_key_reaches_no_file_of_the_run(tmp_path, sample_root, scripted_server):
    secret = "sk-test-secret-abcdef123456"
    code = "import os, pathlib\nprint(os.environ)\nanswer = 0"
    srv = scripted_server(lambda body: Reply(json.dumps({"action": "validate_code", "params": {"code": code}})))
    p = run_cli(model_args(srv.url, api_key_env="MAG_TEST_KEY", n_retry=0) + [
        "task=arith", "data=sample", "run.end_idx=2", "env.num_steps=2", "hydra.run.dir=run"],
        tmp_path, sample_root, env_extra={"MAG_TEST_KEY": secret})
    assert p.returncode == 0, p.stderr
    for f in (tmp_path / "run").rglob("*"):
        if f.is_file():
            assert secret not in f.read_text(errors="replace"), f
    assert secret not in p.stdout + p.stderr


def test_debug_action_goes_to_the_configured_debugger_model(tmp_path, sample_root, scripted_server):
    debug = json.dumps({"action": "debug", "params": {"code": "x = [1][2]", "error_msg": "IndexError"}})
    replies = iter([Reply(debug)])
    agent = scripted_server(lambda body: next(replies, None) or answer_from_goal(body))
    helper = scripted_server(lambda body: Reply("Index 2 is out of range; use x = [1][0]."))
    p = run_cli(["+model=scripted", "model.debugger=scripted_debugger", "task=arith", "data=sample",
                 "run.end_idx=1", "hydra.run.dir=run"], tmp_path, sample_root,
                env_extra={"SCRIPTED_LLM_URL": agent.url, "SCRIPTED_DEBUGGER_URL": helper.url})
    assert p.returncode == 0, p.stderr
    assert len(helper.requests) == 1 and "IndexError" in helper.requests[0]["messages"][-1]["content"]
    assert "out of range" in agent.requests[1]["messages"][-1]["content"]
    assert lines(tmp_path / "run")[0]["outcome"]["status"] == "success"


def test_ctrl_c_stops_cleanly_and_keeps_finished_episodes(tmp_path, sample_root, scripted_server):
    srv = scripted_server(answer_from_goal, latency=0.4)
    args = model_args(srv.url) + ["task=arith", "data=sample", "launcher=joblib", "launcher.n_jobs=2",
                                  "hydra.run.dir=run", f"hydra.searchpath=[file://{TEST_CONF}]"]
    proc = subprocess.Popen([sys.executable, "-m", "medagentgym", *args], cwd=tmp_path,
                            env=cli_env(tmp_path, sample_root), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    episodes = tmp_path / "run" / "episodes.jsonl"
    deadline = time.time() + 60
    while time.time() < deadline and (not episodes.exists() or episodes.read_bytes().count(b"\n") < 2):
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["complete"] is False and 2 <= summary["n_episodes"] < 10
    assert len(lines(tmp_path / "run")) == summary["n_episodes"]
