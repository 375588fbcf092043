"""Iterative DPO: the step plan, resuming at the first unfinished step, a served policy per round, hand-off."""

from __future__ import annotations

import socket
import sys
import urllib.request

import pytest
from omegaconf import OmegaConf

from medagentgym.errors import UserError
from medagentgym.stages.iterative_dpo import Schema
from medagentgym.training.iterative import DONE, plan, run_pipeline, server_url
from medagentgym.training.launch import resolve_model


def cfg(**values):
    return OmegaConf.merge(OmegaConf.structured(Schema), {"inputs": ["/runs/seed"], **values})


def arg(step, prefix: str) -> str:
    return next(a.split("=", 1)[1] for a in step.argv if a.startswith(prefix))


def test_plan_chains_policies_and_keeps_the_sft_model_as_reference(tmp_path):
    steps = plan(cfg(rounds=2, rollouts=4, eval_overrides=["task=arith"]), tmp_path)
    assert [s.name for s in steps] == ["00_warmup_data", "01_sft", "round_1/rollouts", "round_1/data", "round_1/dpo",
                                      "round_2/rollouts", "round_2/data", "round_2/dpo"]
    assert arg(steps[0], "stage.first_n") == "100" and "stage.dpo=false" in steps[0].argv
    assert arg(steps[1], "stage.train_files") == str(tmp_path / "00_warmup_data")
    assert steps[2].serve == str(tmp_path / "01_sft") and "run.num_rollouts=4" in steps[2].argv
    assert "run.split=train" in steps[2].argv
    assert "task=arith" in steps[2].argv and arg(steps[3], "stage.inputs") == f"[{tmp_path / 'round_1/rollouts'}]"
    assert arg(steps[7], "stage.model_path") == str(tmp_path / "round_1/dpo")
    assert arg(steps[7], "stage.ref_model_path") == str(tmp_path / "01_sft")
    assert steps[5].serve == str(tmp_path / "round_1/dpo")
    with pytest.raises(UserError, match="inputs"):
        plan(cfg(inputs=[]), tmp_path)


def test_rerun_resumes_at_the_first_unfinished_step(tmp_path, capsys):
    calls = []

    def failing_at_dpo(argv):
        calls.append(argv[0])
        return 3 if argv[0] == "stage=dpo" else 0

    s = cfg(server={"url": "http://127.0.0.1:9/v1"})  # external server: nothing started here
    assert run_pipeline(s, tmp_path, False, failing_at_dpo) == 3
    assert calls == ["stage=build-sft-data", "stage=sft", "stage=evaluate", "stage=build-sft-data", "stage=dpo"]
    assert (tmp_path / "round_1/data" / DONE).is_file() and not (tmp_path / "round_1/dpo" / DONE).exists()
    calls.clear()
    assert run_pipeline(s, tmp_path, False, lambda argv: calls.append(argv[0]) or 0) == 0
    assert calls == ["stage=dpo"]
    assert "01_sft: done, skipped" in capsys.readouterr().out


def test_dry_run_prints_every_step_and_runs_none(tmp_path, capsys):
    assert run_pipeline(cfg(rounds=1), tmp_path, True, lambda argv: pytest.fail("ran a step")) == 0
    out = capsys.readouterr().out
    assert out.count("-m medagentgym") == 5 and "stage=dpo" in out


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_a_server_is_started_for_the_rollouts_and_stopped_after(tmp_path):
    port = free_port()
    server = {"port": port, "startup_timeout": 60,
              "command": [sys.executable, "-m", "medagentgym.llm.scripted_server", "--port", "{port}"]}
    s = cfg(server=server)
    seen = {}

    def runner(argv):
        if argv[0] == "stage=evaluate":
            body = b'{"model": "policy", "messages": [{"role": "user", "content": "Compute 1 + 2."}]}'
            req = urllib.request.Request(server_url(s.server) + "/chat/completions", data=body,
                                         headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(req, timeout=10) as resp:
                seen["status"] = resp.status
            seen["base_url"] = next(a for a in argv if a.startswith("model.base_url="))
        return 0

    (tmp_path / "01_sft" / "checkpoints").mkdir(parents=True)
    (tmp_path / "01_sft" / "checkpoints" / "config.json").write_text("{}")
    assert run_pipeline(s, tmp_path, False, runner) == 0
    assert seen == {"status": 200, "base_url": f"model.base_url=http://127.0.0.1:{port}/v1"}
    with pytest.raises(OSError):
        urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=2)
    assert (tmp_path / "round_1/rollouts" / "server.log").is_file()


def test_model_hand_off_finds_the_hugging_face_directory(tmp_path):
    assert resolve_model("Qwen/Qwen2.5-7B-Instruct") == "Qwen/Qwen2.5-7B-Instruct"
    verl = tmp_path / "sft"
    for step in (5, 40, 100):
        (verl / "checkpoints" / f"global_step_{step}" / "huggingface").mkdir(parents=True)
        (verl / "checkpoints" / f"global_step_{step}" / "huggingface" / "config.json").write_text("{}")
    assert resolve_model(str(verl)) == str(verl / "checkpoints" / "global_step_100" / "huggingface")
    openrlhf = tmp_path / "dpo" / "checkpoints"
    openrlhf.mkdir(parents=True)
    (openrlhf / "config.json").write_text("{}")
    assert resolve_model(str(tmp_path / "dpo")) == str(openrlhf)
    (tmp_path / "shards" / "global_step_3" / "actor").mkdir(parents=True)
    with pytest.raises(UserError, match="hf_model"):
        resolve_model(str(tmp_path / "shards"))
