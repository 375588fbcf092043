"""The seed-style shell wrappers over stage=sft and stage=dpo, run with bash as a user would."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys

from medagentgym.training.export import ExportSpec, export

from .support import REPO, episode, write_run


def wrapper(script: str, *args: str, cwd) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHON": sys.executable, "PYTHONPATH": str(REPO), "MEDAGENTGYM_OUTPUTS": str(cwd / "out")}
    return subprocess.run(["bash", str(REPO / "scripts" / script), *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120)


def data(tmp_path):
    write_run(tmp_path / "run", [episode(i, 0, "success") for i in range(3)]
              + [episode(i, 1, "wrong_answer", answers=["answer = -1"]) for i in range(3)])
    export([str(tmp_path / "run")], tmp_path / "data", ExportSpec(val_fraction=0))
    return tmp_path / "data"


def test_sft_wrapper_takes_nproc_save_path_and_verl_overrides(tmp_path):
    d = data(tmp_path)
    p = wrapper("sft/run_qwen_7b_medagentgym.sh", "4", str(tmp_path / "ckpt"), f"stage.train_files={d}",
                "stage.dry_run=true", "trainer.save_freq=50", "trainer.total_epochs=2", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    argv = shlex.split(p.stdout.strip().splitlines()[-1])
    assert "--nproc_per_node=4" in argv and "trainer.n_gpus_per_node=4" in argv
    assert f"trainer.default_local_dir={tmp_path / 'ckpt'}" in argv
    assert argv[-2:] == ["trainer.save_freq=50", "trainer.total_epochs=2"]
    assert "trainer.total_epochs=5" not in argv  # the override replaced the default, not duplicated it
    usage = wrapper("sft/run_qwen_7b_medagentgym.sh", "4", cwd=tmp_path)
    assert usage.returncode == 2 and "usage:" in usage.stderr


def test_dpo_wrapper_runs_locally_or_writes_a_slurm_job(tmp_path):
    d = data(tmp_path)
    local = wrapper("dpo/dpo_training.sh", f"stage.dataset={d}", "stage.dry_run=true", cwd=tmp_path)
    assert local.returncode == 0, local.stderr
    assert "--module openrlhf.cli.train_dpo" in local.stdout
    slurm = wrapper("dpo/dpo_training.sh", "slurm", f"stage.dataset={d}", "stage.dry_run=true",
                    f"hydra.run.dir={tmp_path / 'job'}", cwd=tmp_path)
    assert slurm.returncode == 0, slurm.stderr
    script = (tmp_path / "job" / "job.sbatch").read_text()
    assert script.startswith("#!/usr/bin/env bash\n#SBATCH") and "openrlhf.cli.train_dpo" in script
