"""Running a trainer as a child process: where its files go, which environment runs it, and pre-flight checks."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from medagentgym.errors import UserError
from medagentgym.secrets import get_secret, redact
from medagentgym.training.export import DPO_DIR, SFT_DIR

LOG_FILE = "train.log"
COMMAND_FILE = "command.sh"


def stage_run_dir(cfg_output_dir: str | None) -> Path:
    """Hydra's run dir when a Hydra app is running, else the stage's output_dir."""
    try:
        from hydra.core.hydra_config import HydraConfig

        return Path(HydraConfig.get().runtime.output_dir).resolve()
    except ValueError:
        pass
    if not cfg_output_dir:
        raise UserError(
            "No run dir: outside a Hydra run the stage needs stage.output_dir=DIR for its logs and checkpoints."
        )
    return Path(cfg_output_dir).expanduser().resolve()


def executable(env: str | None, name: str) -> str:
    """`name` from the environment's bin/ (a venv or conda prefix) when stage.env is set, else from PATH.

    The path is absolute but not resolved: a venv's bin/python is a symlink whose target would lose the venv.
    """
    if env:
        return str(Path(env).expanduser().absolute() / "bin" / name)
    return shutil.which(name) or name


def resolve_model(value: str | None) -> str | None:
    """A model path as the trainers take it: hub ids pass through; a previous stage's dir is looked into.

    Accepted: a Hugging Face directory (config.json), a sft/dpo run dir (its checkpoints/), a TRL or OpenRLHF
    output dir, or a verl checkpoint dir, where the newest global_step_N/huggingface is taken (saved when
    checkpoint.save_contents includes hf_model).
    """
    if not value:
        return value
    path = Path(value).expanduser()
    if not path.exists():
        return value
    for root in (path, path / "checkpoints"):
        if (root / "config.json").is_file():
            return str(root.resolve())
        steps = sorted(root.glob("global_step_*/huggingface"), key=lambda p: int(p.parent.name.split("_")[-1]))
        if steps and (steps[-1] / "config.json").is_file():
            return str(steps[-1].resolve())
    raise UserError(
        f"Model path {value} exists but holds no Hugging Face model: no config.json in it, in its checkpoints/, "
        "or in a global_step_N/huggingface below them. For verl, train with checkpoint.save_contents including "
        "hf_model (the default here) or merge the FSDP shards first (python -m verl.model_merger)."
    )


def resolve_data(value: str | None, what: str, subdir: str, train_name: str, val_name: str) -> tuple[Path, Path | None]:
    """A data file, or a build-sft-data output dir (its <subdir>/train and val files)."""
    if not value:
        raise UserError(f"stage.{what} is required: a data file or the output directory of stage=build-sft-data.")
    path = Path(value).expanduser().resolve()
    if path.is_file():
        return path, None
    if path.is_dir():
        train = path / subdir / train_name if (path / subdir).is_dir() else path / train_name
        if train.is_file():
            val = train.parent / val_name
            return train, val if val.is_file() else None
    raise UserError(
        f"stage.{what}={value!r}: no such file, and not a directory holding {subdir}/{train_name}. "
        "Pass the file itself or the stage.output_dir that build-sft-data wrote."
    )


def sft_files(train_files: str | None, val_files: str | None) -> tuple[Path, Path | None]:
    train, val = resolve_data(train_files, "train_files", SFT_DIR, "train.parquet", "val.parquet")
    if val_files:
        val = resolve_data(val_files, "val_files", SFT_DIR, "val.parquet", "val.parquet")[0]
    return train, val


def dpo_files(dataset: str | None, eval_dataset: str | None) -> tuple[Path, Path | None]:
    train, val = resolve_data(dataset, "dataset", DPO_DIR, "train.jsonl", "val.jsonl")
    if eval_dataset:
        val = resolve_data(eval_dataset, "eval_dataset", DPO_DIR, "val.jsonl", "val.jsonl")[0]
    return train, val


def check_installed(exe: str, python: str, module: str, env: str | None, install_hint: str) -> None:
    """The launcher exists and the trainer package is importable in the environment that will run it."""
    if not Path(exe).is_file() and shutil.which(exe) is None:
        where = f"in {env}/bin" if env else "on PATH"
        raise UserError(f"{Path(exe).name} is not {where}, so {module} cannot be launched. {install_hint}")
    probe = f"import importlib.util, sys; sys.exit(0 if importlib.util.find_spec({module.split('.')[0]!r}) else 3)"
    res = subprocess.run([python, "-c", probe], capture_output=True, text=True)
    if res.returncode != 0:
        raise UserError(
            f"{module.split('.')[0]} is not installed in the environment of {python}. {install_hint}"
        )


def check_gpus(python: str, trainer: str) -> int:
    """How many CUDA devices the trainer's environment sees; none is an error for GPU-only trainers."""
    probe = "import torch; print(torch.cuda.device_count() if torch.cuda.is_available() else 0)"
    res = subprocess.run([python, "-c", probe], capture_output=True, text=True)
    count = int(res.stdout.strip() or 0) if res.returncode == 0 else 0
    if count == 0:
        raise UserError(
            f"{trainer} needs a CUDA GPU and none is visible to {python} (check nvidia-smi, CUDA_VISIBLE_DEVICES "
            "and that this environment has a CUDA build of torch). On a CPU-only machine use stage.backend=trl "
            "with a small model, or stage.dry_run=true to print the command."
        )
    return count


def require_wandb_key(enabled: bool) -> None:
    if enabled and not os.environ.get("WANDB_API_KEY"):
        raise UserError(
            "stage.wandb=true but WANDB_API_KEY is not set. Export it (export WANDB_API_KEY=...) before launching; "
            "the key is read from the environment only and never written to the run dir."
        )
    if enabled:
        get_secret("WANDB_API_KEY")  # registers the value, so train.log redacts it should a trainer print it


def preflight(exe: str, python: str, module: str, env: str | None, gpu_trainer: str | None,
              wandb: bool) -> Callable[[], None]:
    """The checks run before a real launch: trainer installed, a GPU when it needs one, the wandb key."""
    setup = module.split(".")[0].replace("openrlhf", "trl")  # OpenRLHF lives in the trl environment
    hint = f"Create its environment with scripts/setup_training_envs.sh {setup} and pass stage.env=.venvs/{setup}."

    def check() -> None:
        check_installed(exe, python, module, env, hint)
        if gpu_trainer:
            check_gpus(python, gpu_trainer)
        require_wandb_key(wandb)

    return check


def write_command(run_dir: Path, argv: list[str]) -> str:
    """The command as one shell line, saved in the run dir so a run can be repeated by hand."""
    line = shlex.join(argv)
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / COMMAND_FILE).write_text("#!/usr/bin/env bash\n" + line + "\n")
    return line


def stream(argv: list[str], run_dir: Path, env: dict[str, str] | None = None) -> int:
    """Runs argv, copying its merged output to our stdout and to run_dir/train.log; returns its exit code."""
    run_dir.mkdir(parents=True, exist_ok=True)
    with open(run_dir / LOG_FILE, "a", encoding="utf-8") as log:
        proc = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace", bufsize=1, env=env
        )
        assert proc.stdout is not None
        for line in proc.stdout:
            line = redact(line)
            sys.stdout.write(line)
            log.write(line)
        return proc.wait()


def sbatch_script(argv: list[str], slurm: Any, run_dir: Path, job_name: str) -> Path:
    """A batch script that runs the same command on one allocated node; returns its path."""
    lines = ["#!/usr/bin/env bash", f"#SBATCH --job-name={job_name}", f"#SBATCH --nodes={slurm.nodes}"]
    lines += [f"#SBATCH --gres=gpu:{slurm.gpus_per_node}", f"#SBATCH --time={slurm.time}"]
    lines += [f"#SBATCH --output={run_dir / 'slurm-%j.out'}"]
    if slurm.partition:
        lines.append(f"#SBATCH --partition={slurm.partition}")
    if slurm.account:
        lines.append(f"#SBATCH --account={slurm.account}")
    lines += [f"#SBATCH {opt}" for opt in slurm.extra_sbatch]
    lines += ["set -euo pipefail", shlex.join(argv), ""]
    path = run_dir / "job.sbatch"
    run_dir.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines))
    return path


def submit(script: Path) -> int:
    if shutil.which("sbatch") is None:
        raise UserError(
            f"stage.slurm.submit=true but sbatch is not on PATH. Submit {script} from a Slurm login node, or "
            "set stage.slurm.submit=false to only write the script."
        )
    return subprocess.run(["sbatch", str(script)]).returncode


def launch(argv: list[str], run_dir: Path, dry_run: bool, checks: Callable[[], None]) -> int:
    """Prints the exact command; unless dry_run, runs the pre-flight checks, then the command, streamed."""
    line = shlex.join(argv)
    print(line, flush=True)
    if dry_run:
        return 0
    checks()
    write_command(run_dir, argv)
    code = stream(argv, run_dir)
    print(f"[medagentgym] trainer exited with code {code}; log: {run_dir / LOG_FILE}", flush=True)
    return code
