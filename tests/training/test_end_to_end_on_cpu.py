"""evaluate (oracle + a weak scripted agent) -> build-sft-data -> sft (TRL, 2 steps) -> dpo (TRL, 2 steps).

Every stage runs through the real CLI and takes the previous stage's directory unchanged; the model is a tiny
random Qwen2 with the real Qwen2.5 chat template, trained for real on CPU.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from tests.conftest import Reply, model_args, run_cli

from .support import VENVS

pytestmark = [pytest.mark.training, pytest.mark.slow]
CPU_ENV = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "WANDB_MODE": "disabled", "OMP_NUM_THREADS": "2",
           "TOKENIZERS_PARALLELISM": "false"}


def weak_agent(body) -> Reply:
    """Always submits the same wrong answer, so every episode fails on the step budget."""
    return Reply(json.dumps({"action": "validate_code", "params": {"code": "answer = -1000"}}))


def cli(args: list[str], tmp_path: Path, sample_root: Path) -> str:
    p = run_cli(args, tmp_path, sample_root, timeout=600, env_extra=CPU_ENV)
    assert p.returncode == 0, (p.stdout + p.stderr)[-4000:]
    return p.stdout


def digest(model_dir: Path) -> str:
    return hashlib.sha256((model_dir / "model.safetensors").read_bytes()).hexdigest()


def test_evaluate_to_dpo_on_cpu(tmp_path, sample_root, scripted_server, tiny_model):
    trl_env = VENVS / "trl"
    if not (trl_env / "bin" / "python").is_file():
        pytest.skip(f"no trl environment at {trl_env}: create it with scripts/setup_training_envs.sh trl")
    ev, data, sft, dpo = (tmp_path / n for n in ("eval", "data", "sft", "dpo"))
    common = ["task=arith", "data=sample", "run.end_idx=6"]
    cli(["+model=oracle", *common, f"hydra.run.dir={ev / 'oracle'}"], tmp_path, sample_root)
    srv = scripted_server(weak_agent)
    cli(model_args(srv.url) + [*common, "env.num_steps=2", f"hydra.run.dir={ev / 'weak'}"], tmp_path, sample_root)

    out = cli(["stage=build-sft-data", f"stage.inputs=[{ev}]", "stage.val_fraction=0", f"hydra.run.dir={data}"],
              tmp_path, sample_root)
    report = json.loads((data / "report.json").read_text())
    assert report["sft"]["train_rows"] == 6 and report["dpo"]["train_rows"] == 6, out
    assert report["statuses"]["success"] == 6 and sum(report["statuses"].values()) == 12

    trl = ["stage.backend=trl", f"stage.env={trl_env}", "stage.max_steps=2"]
    cli(["stage=sft", *trl, f"stage.train_files={data}", f"stage.model_path={tiny_model}",
         "stage.micro_batch_size_per_gpu=2", "stage.max_length=1024", f"hydra.run.dir={sft}"], tmp_path, sample_root)
    assert "trained 2 steps" in (sft / "train.log").read_text()
    cli(["stage=dpo", *trl, f"stage.dataset={data}", f"stage.model_path={sft}", "stage.micro_train_batch_size=2",
         "stage.max_len=1024", f"hydra.run.dir={dpo}"], tmp_path, sample_root)
    log = (dpo / "train.log").read_text()
    assert "trained 2 steps" in log
    # Each stage changed the weights it was handed, and left a model the next one can load.
    assert len({digest(tiny_model), digest(sft / "checkpoints"), digest(dpo / "checkpoints")}) == 3
    assert (dpo / "checkpoints" / "tokenizer_config.json").is_file()
    assert str(sft / "checkpoints") in (dpo / "command.sh").read_text()
