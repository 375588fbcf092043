"""Command lines for verl (SFT), OpenRLHF (DPO) and our TRL script, in current and legacy syntax.

Builders are pure: settings and resolved paths in, argv out, so what dry_run prints is what runs. Key names
follow verl 0.9.x (`verl.trainer.sft_trainer`, engine.* / model.path) and OpenRLHF 0.11.x (dotted flags);
`trainer_version` at or below LEGACY_VERL / LEGACY_OPENRLHF switches to the names those releases took.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

from medagentgym.errors import UserError

LEGACY_VERL = (0, 7, 0)
LEGACY_OPENRLHF = (0, 9, 1)
WANDB_KEY_ENV = "WANDB_API_KEY"
TRL_SCRIPT = Path(__file__).resolve().parent / "trl_train.py"

# verl 0.9 key -> verl <= 0.7.0 key (fsdp_sft_trainer); None: the old trainer has no such key.
_VERL_LEGACY = {
    "data.messages_key": "data.multiturn.messages_key",
    "data.max_token_len_per_gpu": None,
    "model.path": "model.partial_pretrain",
    "model.use_remove_padding": "use_remove_padding",
    "engine.ulysses_sequence_parallel_size": "ulysses_sequence_parallel_size",
    "engine.param_offload": "model.fsdp_config.offload_params",
    "engine.optimizer_offload": "model.fsdp_config.cpu_offload",
    "checkpoint.save_contents": "trainer.checkpoint.save_contents",
}
# OpenRLHF 0.11 flag -> OpenRLHF <= 0.9.1 flag.
_OPENRLHF_LEGACY = {
    "--ckpt.output_dir": "--save_path",
    "--ckpt.save_steps": "--save_steps",
    "--ckpt.path": "--ckpt_path",
    "--ckpt.load_enable": "--load_checkpoint",
    "--logger.logging_steps": "--logging_steps",
    "--eval.steps": "--eval_steps",
    "--eval.dataset": "--eval_dataset",
    "--train.batch_size": "--train_batch_size",
    "--train.micro_batch_size": "--micro_train_batch_size",
    "--train.max_epochs": "--max_epochs",
    "--train.seed": "--seed",
    "--model.model_name_or_path": "--pretrain",
    "--ref.model_name_or_path": "--ref_pretrain",
    "--model.beta": "--beta",
    "--model.label_smoothing": "--label_smoothing",
    "--model.gradient_checkpointing_enable": "--gradient_checkpointing",
    "--data.max_len": "--max_len",
    "--data.dataset": "--dataset",
    "--data.apply_chat_template": "--apply_chat_template",
    "--data.prompt_key": "--prompt_key",
    "--data.chosen_key": "--chosen_key",
    "--data.rejected_key": "--rejected_key",
    "--ds.zero_stage": "--zero_stage",
    "--ds.attn_implementation": "--attn_implementation",
    "--adam.lr": "--learning_rate",
    "--logger.wandb.key": "--use_wandb",
    "--logger.wandb.project": "--wandb_project",
    "--logger.wandb.run_name": "--wandb_run_name",
}


def parse_version(text: str) -> tuple[int, ...]:
    nums = re.findall(r"\d+", str(text))[:3]
    if not nums:
        raise UserError(f"stage.trainer_version={text!r} is not a version; write it like 0.9.1.")
    return tuple(int(n) for n in nums) + (0,) * (3 - len(nums))


def hydra_value(value: Any) -> str:
    """A value as a Hydra command-line override writes it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(hydra_value(v) for v in value) + "]"
    text = str(value)
    if re.fullmatch(r"[\w./~:+@-]*", text) and text:
        return text
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def train_batch_size(s: Any, rows: int) -> int:
    """verl splits the global batch over data-parallel ranks and the data into whole batches: a batch larger
    than the data gives zero steps (a division by zero), one smaller than the ranks gives empty ranks."""
    dp = max(1, s.nnodes * s.nproc_per_node // max(1, int(s.sequence_parallel_size)))
    if rows < dp:
        raise UserError(
            f"{rows} training rows cannot fill {dp} data-parallel ranks (nnodes x nproc_per_node / "
            "sequence_parallel_size): export more trajectories or train on fewer GPUs."
        )
    batch = min(int(s.train_batch_size), rows)
    return batch - batch % dp


def verl_sft_command(s: Any, exe: str, run_dir: Path, train: Path, val: Path | None, rows: int) -> list[str]:
    """torchrun over verl's SFT trainer. `s` is the sft stage config; `rows` the train rows (caps the batch)."""
    legacy = parse_version(s.trainer_version) <= LEGACY_VERL
    sp = int(s.sequence_parallel_size)
    logger = list(s.logger) + (["wandb"] if s.wandb and "wandb" not in s.logger else [])
    keys: dict[str, Any] = {
        "data.train_files": str(train),
        "data.val_files": str(val) if val else None,
        "data.messages_key": "messages",
        "data.micro_batch_size_per_gpu": s.micro_batch_size_per_gpu,
        "data.max_length": s.max_length,
        "data.max_token_len_per_gpu": s.max_token_len_per_gpu or math.ceil(s.max_length / sp),
        "data.train_batch_size": train_batch_size(s, rows),
        "data.truncation": s.truncation,
        "model.path": s.model_path,
        "model.enable_gradient_checkpointing": s.gradient_checkpointing,
        "model.use_remove_padding": s.use_remove_padding,
        "engine.ulysses_sequence_parallel_size": sp,
        "engine.param_offload": s.param_offload,
        "engine.optimizer_offload": s.optimizer_offload,
        # Set explicitly: verl's own default learning rate changed between releases.
        "optim.lr": s.lr,
        "trainer.default_local_dir": str(checkpoint_dir(s, run_dir)),
        "trainer.project_name": s.project_name,
        "trainer.experiment_name": s.experiment_name or run_dir.name,
        "trainer.total_epochs": s.total_epochs,
        "trainer.logger": logger,
        "trainer.nnodes": s.nnodes,
        "trainer.n_gpus_per_node": s.nproc_per_node,
        "checkpoint.save_contents": list(s.save_contents),
        # verl is a Hydra app too: its outputs go under our run dir instead of ./outputs.
        "hydra.run.dir": str(run_dir / "verl"),
    }
    module = "verl.trainer.sft_trainer"
    if legacy:
        module = "verl.trainer.fsdp_sft_trainer"
        keys = {_VERL_LEGACY.get(k, k): v for k, v in keys.items() if _VERL_LEGACY.get(k, k) is not None}
        keys["data.multiturn.enable"] = True
    extra = [str(o) for o in s.extra_overrides]
    # A key given in extra_overrides replaces ours rather than appearing twice.
    replaced = {o.split("=", 1)[0].lstrip("+~") for o in extra}
    head = [exe, "--standalone", f"--nnodes={s.nnodes}", f"--nproc_per_node={s.nproc_per_node}", "-m", module]
    return head + [f"{k}={hydra_value(v)}" for k, v in keys.items() if k not in replaced] + extra


def openrlhf_dpo_command(s: Any, exe: str, run_dir: Path, train: Path, val: Path | None) -> list[str]:
    """deepspeed over OpenRLHF's DPO trainer; flags with None are left out, True flags are switches."""
    legacy = parse_version(s.trainer_version) <= LEGACY_OPENRLHF
    out = checkpoint_dir(s, run_dir)
    flags: dict[str, Any] = {
        "--ckpt.output_dir": str(out),
        "--ckpt.path": str(out / "checkpoints_dpo"),
        "--ckpt.save_steps": s.save_steps,
        "--ckpt.load_enable": s.load_checkpoint,
        "--logger.logging_steps": s.logging_steps,
        "--eval.steps": s.eval_steps,
        "--eval.dataset": str(val) if val else None,
        "--train.batch_size": s.train_batch_size,
        "--train.micro_batch_size": s.micro_train_batch_size,
        "--train.max_epochs": s.max_epochs,
        "--train.seed": s.seed,
        "--model.model_name_or_path": s.model_path,
        "--ref.model_name_or_path": s.ref_model_path or s.model_path,
        "--model.beta": s.beta,
        "--model.label_smoothing": s.label_smoothing,
        "--model.gradient_checkpointing_enable": s.gradient_checkpointing,
        "--data.dataset": str(train),
        "--data.max_len": s.max_len,
        "--data.apply_chat_template": s.apply_chat_template,
        "--data.prompt_key": "prompt",
        "--data.chosen_key": "chosen",
        "--data.rejected_key": "rejected",
        "--ds.zero_stage": s.zero_stage,
        "--ds.attn_implementation": s.attn_implementation,
        "--adam.lr": s.lr,
        # OpenRLHF turns wandb on when this is non-empty and logs in with it only if wandb has no key yet;
        # wandb reads WANDB_API_KEY from the environment, so the variable's name stands in for its value.
        "--logger.wandb.key": WANDB_KEY_ENV if s.wandb else None,
        "--logger.wandb.project": s.wandb_project if s.wandb else None,
        "--logger.wandb.run_name": (s.wandb_run_name or run_dir.name) if s.wandb else None,
    }
    if legacy:
        flags = {_OPENRLHF_LEGACY.get(k, k): v for k, v in flags.items()}
        flags["--bf16"] = True  # 0.11 trains in bf16 by default; older releases needed the switch
    gpus = "localhost:" + ",".join(str(g) for g in s.gpus)
    argv = [exe, "--master_port", str(s.master_port), "--include", gpus, "--module", "openrlhf.cli.train_dpo"]
    for flag, value in flags.items():
        if value is None or value is False:
            continue
        argv += [flag] if value is True else [flag, str(value)]
    return argv + [str(a) for a in s.extra_args]


def trl_command(kind: str, s: Any, python: str, run_dir: Path, train: Path, val: Path | None, model: str) -> list[str]:
    """Our TRL script (runs in the TRL environment, imports nothing of ours)."""
    argv = [python, str(TRL_SCRIPT), kind, "--model", model, "--train-file", str(train)]
    argv += ["--output-dir", str(checkpoint_dir(s, run_dir)), "--lr", str(s.lr), "--seed", str(s.seed)]
    argv += ["--epochs", str(s.total_epochs if kind == "sft" else s.max_epochs)]
    argv += ["--batch-size", str(s.micro_batch_size_per_gpu if kind == "sft" else s.micro_train_batch_size)]
    argv += ["--max-length", str(s.max_length if kind == "sft" else s.max_len)]
    if val:
        argv += ["--val-file", str(val)]
    if s.max_steps:
        argv += ["--max-steps", str(s.max_steps)]
    if kind == "dpo":
        argv += ["--beta", str(s.beta), "--label-smoothing", str(s.label_smoothing)]
        if s.ref_model_path:
            argv += ["--ref-model", s.ref_model_path]
    if s.wandb:
        argv += ["--wandb"]
    return argv


def checkpoint_dir(s: Any, run_dir: Path) -> Path:
    return Path(s.save_path).expanduser().resolve() if s.save_path else run_dir / "checkpoints"
