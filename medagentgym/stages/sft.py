"""stage=sft: supervised fine-tuning on build-sft-data's parquet with verl (GPU) or TRL (CPU-capable)."""

from __future__ import annotations

from dataclasses import dataclass, field

from omegaconf import DictConfig


@dataclass
class Schema:
    name: str = "sft"
    backend: str = "verl"  # verl | trl
    dry_run: bool = False  # print the command and exit
    env: str | None = None  # venv/conda prefix whose bin/ runs the trainer; null: PATH
    trainer_version: str = "0.9.1"  # verl release; <= 0.7.0 emits the fsdp_sft_trainer syntax
    train_files: str | None = None  # a parquet file or a build-sft-data output dir
    val_files: str | None = None  # null: the dir's sft/val.parquet when it exists
    output_dir: str | None = None  # run dir outside Hydra
    save_path: str | None = None  # checkpoints; null: <run dir>/checkpoints
    model_path: str = "Qwen/Qwen2.5-7B-Instruct"
    nnodes: int = 1
    nproc_per_node: int = 8
    micro_batch_size_per_gpu: int = 4
    train_batch_size: int = 256  # capped at the number of train rows
    max_length: int = 40000
    max_token_len_per_gpu: int | None = None  # null: ceil(max_length / sequence_parallel_size)
    truncation: str = "right"
    lr: float = 1e-4
    total_epochs: int = 5
    sequence_parallel_size: int = 2
    param_offload: bool = True
    optimizer_offload: bool = True
    gradient_checkpointing: bool = True
    use_remove_padding: bool = True
    save_contents: list[str] = field(default_factory=lambda: ["model", "optimizer", "extra", "hf_model"])
    project_name: str = "medagentgym"
    experiment_name: str | None = None  # null: the run dir's name
    logger: list[str] = field(default_factory=lambda: ["console"])
    wandb: bool = False  # needs WANDB_API_KEY in the environment
    extra_overrides: list[str] = field(default_factory=list)  # passed to verl as is
    # trl backend only
    max_steps: int | None = None
    seed: int = 0


def run(cfg: DictConfig) -> int:
    import pyarrow.parquet as pq

    from medagentgym.errors import UserError
    from medagentgym.training import commands as C
    from medagentgym.training import launch as L

    s = cfg.stage
    run_dir = L.stage_run_dir(s.output_dir)
    train, val = L.sft_files(s.train_files, s.val_files)
    python = L.executable(s.env, "python")
    s.model_path = L.resolve_model(s.model_path)
    if s.backend == "verl":
        exe = L.executable(s.env, "torchrun")
        argv = C.verl_sft_command(s, exe, run_dir, train, val, pq.ParquetFile(train).metadata.num_rows)
        checks = L.preflight(exe, python, "verl.trainer.sft_trainer", s.env, "verl", s.wandb)
    elif s.backend == "trl":
        argv = C.trl_command("sft", s, python, run_dir, train, val, s.model_path)
        checks = L.preflight(python, python, "trl", s.env, None, s.wandb)
    else:
        raise UserError(f"stage.backend={s.backend!r} is not an SFT backend; use verl (GPUs) or trl (CPU or one GPU).")
    return L.launch(argv, run_dir, s.dry_run, checks)
