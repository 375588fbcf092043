"""The training stages composed through Hydra: their commands (current and legacy syntax), dry runs, errors."""

from __future__ import annotations

import shlex
import sys

import pytest
from hydra import compose, initialize_config_dir
from hydra.errors import ConfigCompositionException

from medagentgym.config import conf_dir, register_configs
from medagentgym.errors import UserError
from medagentgym.stages import stage_module
from medagentgym.training.commands import train_batch_size
from medagentgym.training.export import ExportSpec, export
from medagentgym.training.launch import launch, require_wandb_key

from .support import episode, write_run

register_configs()


def compose_stage(stage: str, *overrides: str):
    with initialize_config_dir(config_dir=str(conf_dir()), version_base="1.3"):
        return compose("config", overrides=[f"stage={stage}", *overrides])


def run_stage(stage: str, *overrides: str) -> int:
    cfg = compose_stage(stage, *overrides)
    return stage_module(cfg.stage.name).run(cfg)


@pytest.fixture
def data_dir(tmp_path):
    write_run(tmp_path / "run", [episode(i, 0, "success") for i in range(6)]
              + [episode(i, 1, "wrong_answer", answers=["answer = -1"]) for i in range(6)])
    out = tmp_path / "data"
    export([str(tmp_path / "run")], out, ExportSpec(val_fraction=0.34))
    return out


def printed_command(capsys) -> list[str]:
    return shlex.split(capsys.readouterr().out.strip().splitlines()[-1])


@pytest.mark.parametrize("stage", ["build-sft-data", "sft", "dpo", "iterative-dpo"])
def test_unknown_stage_keys_fail_at_compose_time(stage):
    with pytest.raises(ConfigCompositionException):
        compose_stage(stage, "stage.no_such_key=1")


def test_sft_dry_run_prints_verl_09_command_with_seed_defaults(tmp_path, data_dir, capsys):
    assert run_stage("sft", f"stage.train_files={data_dir}", f"stage.output_dir={tmp_path / 'sft'}",
                     "stage.dry_run=true", "stage.nproc_per_node=4",
                     "stage.extra_overrides=['trainer.save_freq=10']") == 0
    argv = printed_command(capsys)
    assert argv[1:6] == ["--standalone", "--nnodes=1", "--nproc_per_node=4", "-m", "verl.trainer.sft_trainer"]
    kv = dict(a.split("=", 1) for a in argv[6:])
    assert kv["data.train_files"] == str(data_dir / "sft" / "train.parquet")
    assert kv["data.val_files"] == str(data_dir / "sft" / "val.parquet")
    assert kv["data.messages_key"] == "messages" and kv["data.max_length"] == "40000"
    assert kv["data.max_token_len_per_gpu"] == "20000"  # max_length / sequence parallel 2
    assert kv["data.train_batch_size"] == "4"  # capped at the 4 train rows
    assert kv["optim.lr"] == "0.0001" and kv["trainer.total_epochs"] == "5"
    assert kv["engine.ulysses_sequence_parallel_size"] == "2" and kv["engine.param_offload"] == "true"
    assert kv["model.path"] == "Qwen/Qwen2.5-7B-Instruct"
    assert kv["checkpoint.save_contents"] == "[model,optimizer,extra,hf_model]"
    assert kv["hydra.run.dir"] == str(tmp_path / "sft" / "verl")
    assert kv["trainer.save_freq"] == "10"
    assert not (tmp_path / "sft" / "train.log").exists()  # a dry run runs nothing


def test_sft_legacy_syntax_for_old_verl(tmp_path, data_dir, capsys):
    run_stage("sft", f"stage.train_files={data_dir}", f"stage.output_dir={tmp_path}", "stage.dry_run=true",
              "stage.trainer_version=0.6.1")
    argv = printed_command(capsys)
    assert "verl.trainer.fsdp_sft_trainer" in argv
    kv = dict(a.split("=", 1) for a in argv[6:])
    assert kv["data.multiturn.enable"] == "true" and kv["data.multiturn.messages_key"] == "messages"
    assert kv["model.partial_pretrain"] == "Qwen/Qwen2.5-7B-Instruct" and kv["ulysses_sequence_parallel_size"] == "2"
    assert not any(k.startswith("engine.") or k == "model.path" for k in kv)


def test_dpo_dry_run_prints_openrlhf_011_flags_and_keeps_the_wandb_key_out(tmp_path, data_dir, capsys, monkeypatch):
    monkeypatch.setenv("WANDB_API_KEY", "secret-value-123456")
    run_stage("dpo", f"stage.dataset={data_dir}", f"stage.output_dir={tmp_path / 'dpo'}", "stage.dry_run=true",
              "stage.wandb=true", "stage.gpus=[0,1]")
    out = capsys.readouterr().out
    assert "secret-value-123456" not in out
    argv = shlex.split(out.strip().splitlines()[-1])
    assert argv[1:7] == ["--master_port", "29500", "--include", "localhost:0,1", "--module", "openrlhf.cli.train_dpo"]
    flags = " ".join(argv)
    for expected in ["--train.batch_size 64", "--train.micro_batch_size 1", "--train.max_epochs 1",
                     "--data.max_len 8192", "--ds.zero_stage 3", "--adam.lr 5e-06", "--model.beta 0.1",
                     "--model.label_smoothing 0.1", f"--data.dataset {data_dir / 'dpo' / 'train.jsonl'}",
                     f"--eval.dataset {data_dir / 'dpo' / 'val.jsonl'}", "--data.prompt_key prompt",
                     "--ref.model_name_or_path Qwen/Qwen2.5-7B-Instruct", "--logger.wandb.key WANDB_API_KEY",
                     f"--ckpt.output_dir {tmp_path / 'dpo' / 'checkpoints'}"]:
        assert expected in flags
    for switch in ["--data.apply_chat_template", "--ckpt.load_enable", "--model.gradient_checkpointing_enable"]:
        assert switch in argv
    assert not (tmp_path / "dpo" / "command.sh").exists()


def test_dpo_legacy_flags_and_slurm_script(tmp_path, data_dir, capsys):
    run_stage("dpo", f"stage.dataset={data_dir / 'dpo' / 'train.jsonl'}", f"stage.output_dir={tmp_path}",
              "stage.trainer_version=0.9.1", "stage.slurm.enabled=true", "stage.slurm.partition=gpu")
    script = (tmp_path / "job.sbatch").read_text()
    assert "#SBATCH --partition=gpu" in script and "#SBATCH --gres=gpu:8" in script
    line = script.strip().splitlines()[-1]
    for flag in ["--pretrain", "--save_path", "--learning_rate", "--train_batch_size", "--bf16", "--load_checkpoint"]:
        assert flag in shlex.split(line)
    assert "--eval_dataset" not in line  # a single file has no val split next to it


def test_missing_inputs_and_trainers_are_user_errors(tmp_path, data_dir):
    with pytest.raises(UserError, match="train_files is required"):
        run_stage("sft", f"stage.output_dir={tmp_path}")
    with pytest.raises(UserError, match="build-sft-data"):
        run_stage("dpo", f"stage.dataset={tmp_path / 'missing'}", f"stage.output_dir={tmp_path}")
    with pytest.raises(UserError, match="not a DPO backend"):
        run_stage("dpo", f"stage.dataset={data_dir}", f"stage.output_dir={tmp_path}", "stage.backend=verl")
    with pytest.raises(UserError, match="torchrun is not in"):
        run_stage("sft", f"stage.train_files={data_dir}", f"stage.output_dir={tmp_path}",
                  f"stage.env={tmp_path / 'no_env'}")
    with pytest.raises(UserError, match="stage.inputs is empty"):
        run_stage("build-sft-data", f"stage.output_dir={tmp_path}")


def test_build_sft_data_stage_writes_the_layout_the_trainers_take(tmp_path, capsys):
    write_run(tmp_path / "run", [episode(i, 0, "success") for i in range(4)])
    assert run_stage("build-sft-data", f"stage.inputs=[{tmp_path / 'run'}]", f"stage.output_dir={tmp_path / 'o'}",
                     "stage.val_fraction=0") == 0
    assert (tmp_path / "o" / "sft" / "train.parquet").is_file() and not (tmp_path / "o" / "dpo").exists()
    assert "sft: 4 train / 0 val rows" in capsys.readouterr().out


def test_launch_streams_saves_and_propagates_the_exit_code(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("WANDB_API_KEY", "wandb-secret-7890abcd")
    require_wandb_key(True)
    child = "import os, sys; print('step 1 key', os.environ['WANDB_API_KEY']); sys.exit(7)"
    assert launch([sys.executable, "-c", child], tmp_path, False, lambda: None) == 7
    log = (tmp_path / "train.log").read_text()
    assert "step 1 key [REDACTED]" in log and "wandb-secret" not in log + capsys.readouterr().out
    assert (tmp_path / "command.sh").read_text().splitlines()[-1] == shlex.join([sys.executable, "-c", child])
    monkeypatch.delenv("WANDB_API_KEY")
    with pytest.raises(UserError, match="WANDB_API_KEY"):
        require_wandb_key(True)


@pytest.mark.parametrize("rows, nproc, expected", [(4, 4, 4), (11, 8, 8), (1000, 8, 256), (7, 2, 7)])
def test_verl_batch_fits_the_data_and_the_ranks(rows, nproc, expected):
    s = compose_stage("sft", f"stage.nproc_per_node={nproc}").stage
    assert train_batch_size(s, rows) == expected
    with pytest.raises(UserError, match="data-parallel ranks"):
        train_batch_size(s, nproc // 2 - 1)
