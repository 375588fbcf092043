"""Our files and commands against the trainers' own code: verl 0.9.1 and OpenRLHF 0.11.2 on CPU.

Each check runs in the trainer's environment (scripts/setup_training_envs.sh) and skips when it is absent.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from medagentgym.errors import UserError
from medagentgym.stages import dpo as dpo_stage
from medagentgym.stages import sft as sft_stage
from medagentgym.training.commands import openrlhf_dpo_command, verl_sft_command
from medagentgym.training.export import ExportSpec, export

from .support import HERE, episode, run_in, venv_python, write_run

pytestmark = pytest.mark.training


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> Path:
    """Multi-step successes and failures of several instances, exported the way build-sft-data does."""
    root = tmp_path_factory.mktemp("train_data")
    good = [episode(i, 0, "success", answers=["x = 1", f"answer = {i}"], model="oracle") for i in range(6)]
    bad = [episode(i, 1, "wrong_answer", answers=["x = 1", "answer = -1", "answer = -2"], model="weak")
           for i in range(6)]
    write_run(root / "run", good + bad)
    export([str(root / "run")], root / "data", ExportSpec(val_fraction=0.34))
    return root / "data"


def stage_cfg(schema, **values):
    return OmegaConf.merge(OmegaConf.structured(schema), values)


def test_sft_parquet_loads_in_verls_multiturn_dataset_with_an_exact_loss_mask(data_dir, tiny_model):
    res = run_in(venv_python("verl"), [str(HERE / "check_verl.py"), str(data_dir / "sft" / "train.parquet"),
                                       str(tiny_model)])
    assert res.returncode == 0, res.stderr[-3000:]
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert out["rows"] == 4 and out["loss_mask_exact"] == [True] * 4


def test_verl_sft_trainer_accepts_our_overrides(data_dir, tmp_path):
    python = venv_python("verl")
    s = stage_cfg(sft_stage.Schema, wandb=True, extra_overrides=["trainer.save_freq=7"])
    argv = verl_sft_command(s, "torchrun", tmp_path, data_dir / "sft" / "train.parquet",
                            data_dir / "sft" / "val.parquet", rows=4)
    res = run_in(python, ["-m", "verl.trainer.sft_trainer", "--cfg", "job", *argv[6:]], timeout=300, cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    job = OmegaConf.create(res.stdout)
    assert job.data.messages_key == "messages" and job.data.max_token_len_per_gpu == 20000
    assert job.engine.ulysses_sequence_parallel_size == 2 and job.engine.param_offload is True
    assert job.model.path == "Qwen/Qwen2.5-7B-Instruct" and job.optim.lr == 1e-4
    assert list(job.checkpoint.save_contents) == ["model", "optimizer", "extra", "hf_model"]
    assert list(job.trainer.logger) == ["console", "wandb"] and job.trainer.save_freq == 7
    # A key verl does not know is refused, so the acceptance above means something.
    bad = run_in(python, ["-m", "verl.trainer.sft_trainer", "--cfg", "job", "data.no_such_key=1"], timeout=300,
                 cwd=tmp_path)
    assert bad.returncode != 0


def test_dpo_jsonl_loads_in_openrlhf_reward_dataset(data_dir, tiny_model):
    res = run_in(venv_python("trl"), [str(HERE / "check_openrlhf.py"), "dataset",
                                      str(data_dir / "dpo" / "train.jsonl"), str(tiny_model)])
    assert res.returncode == 0, res.stderr[-3000:]
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert out["rows"] == 4 and all(out["whole"]) and len(out["whole"]) == 8


def test_openrlhf_train_dpo_parser_accepts_our_flags(data_dir, tmp_path):
    s = stage_cfg(dpo_stage.Schema, wandb=True)
    argv = openrlhf_dpo_command(s, "deepspeed", tmp_path, data_dir / "dpo" / "train.jsonl",
                                data_dir / "dpo" / "val.jsonl")
    flags = argv[argv.index("openrlhf.cli.train_dpo") + 1:]
    res = run_in(venv_python("trl"), [str(HERE / "check_openrlhf.py"), "parse", *flags], timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    args = json.loads(res.stdout.strip().splitlines()[-1])
    assert args["train.batch_size"] == 64 and args["adam.lr"] == 5e-6 and args["ds.zero_stage"] == 3
    assert args["data.apply_chat_template"] is True and args["ckpt.load_enable"] is True
    assert args["ref.model_name_or_path"] == "Qwen/Qwen2.5-7B-Instruct"
    assert args["data.dataset"].endswith("train.jsonl") and args["eval.dataset"].endswith("val.jsonl")
    assert args["model.label_smoothing"] == 0.1 and args["logger.wandb.key"] == "WANDB_API_KEY"
    bad = run_in(venv_python("trl"), [str(HERE / "check_openrlhf.py"), "parse", "--pretrain", "x"], timeout=300)
    assert bad.returncode != 0 and "unrecognized arguments" in bad.stderr


def test_no_visible_gpu_is_a_clear_error_before_launch(data_dir, tmp_path):
    env = venv_python("verl").parent.parent
    cfg = OmegaConf.create({"stage": OmegaConf.merge(OmegaConf.structured(sft_stage.Schema), {
        "train_files": str(data_dir), "output_dir": str(tmp_path), "env": str(env)})})
    with pytest.raises(UserError, match="needs a CUDA GPU"):
        sft_stage.run(cfg)
    assert not (tmp_path / "train.log").exists()
