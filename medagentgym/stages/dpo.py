"""stage=dpo: direct preference optimisation on build-sft-data's pairs with OpenRLHF (GPU) or TRL (CPU-capable)."""

from __future__ import annotations

from dataclasses import dataclass, field

from omegaconf import DictConfig


@dataclass
class SlurmSchema:
    enabled: bool = False  # write job.sbatch in the run dir instead of running
    submit: bool = False  # and hand it to sbatch
    nodes: int = 1
    gpus_per_node: int = 8
    time: str = "24:00:00"
    partition: str | None = None
    account: str | None = None
    extra_sbatch: list[str] = field(default_factory=list)  # further "--key=value" lines


@dataclass
class Schema:
    name: str = "dpo"
    backend: str = "openrlhf"  # openrlhf | trl
    dry_run: bool = False
    env: str | None = None  # venv/conda prefix whose bin/ runs the trainer; null: PATH
    trainer_version: str = "0.11.2"  # OpenRLHF release; <= 0.9.1 emits the flat flag names
    dataset: str | None = None  # a JSONL file or a build-sft-data output dir
    eval_dataset: str | None = None  # null: the dir's dpo/val.jsonl when it exists
    output_dir: str | None = None  # run dir outside Hydra
    save_path: str | None = None  # the trained model; null: <run dir>/checkpoints
    model_path: str = "Qwen/Qwen2.5-7B-Instruct"
    ref_model_path: str | None = None  # frozen reference; null: the policy's starting point
    master_port: int = 29500
    gpus: list[int] = field(default_factory=lambda: list(range(8)))  # --include localhost:0,1,...
    train_batch_size: int = 64
    micro_train_batch_size: int = 1
    max_epochs: int = 1
    max_len: int = 8192
    zero_stage: int = 3
    lr: float = 5e-6
    beta: float = 0.1
    label_smoothing: float = 0.1
    save_steps: int = -1
    logging_steps: int = 1
    eval_steps: int = -1
    load_checkpoint: bool = True
    gradient_checkpointing: bool = True
    apply_chat_template: bool = True
    attn_implementation: str | None = None  # null: OpenRLHF's default (flash_attention_2)
    wandb: bool = False  # needs WANDB_API_KEY in the environment
    wandb_project: str = "medagentgym"
    wandb_run_name: str | None = None
    extra_args: list[str] = field(default_factory=list)  # passed to OpenRLHF as is
    slurm: SlurmSchema = field(default_factory=SlurmSchema)
    # trl backend only
    max_steps: int | None = None
    seed: int = 42


def run(cfg: DictConfig) -> int:
    import shlex

    from medagentgym.errors import UserError
    from medagentgym.training import commands as C
    from medagentgym.training import launch as L

    s = cfg.stage
    run_dir = L.stage_run_dir(s.output_dir)
    train, val = L.dpo_files(s.dataset, s.eval_dataset)
    python = L.executable(s.env, "python")
    s.model_path = L.resolve_model(s.model_path)
    s.ref_model_path = L.resolve_model(s.ref_model_path)
    if s.backend == "openrlhf":
        exe = L.executable(s.env, "deepspeed")
        argv = C.openrlhf_dpo_command(s, exe, run_dir, train, val)
        checks = L.preflight(exe, python, "openrlhf.cli.train_dpo", s.env, "OpenRLHF", s.wandb)
    elif s.backend == "trl":
        argv = C.trl_command("dpo", s, python, run_dir, train, val, s.model_path)
        checks = L.preflight(python, python, "trl", s.env, None, s.wandb)
    else:
        raise UserError(
            f"stage.backend={s.backend!r} is not a DPO backend; use openrlhf (GPUs) or trl (CPU or one GPU)."
        )
    if s.slurm.enabled:
        # The job runs the same command on the allocated node; the checks happen there, not on the login node.
        script = L.sbatch_script(argv, s.slurm, run_dir, job_name=f"dpo-{run_dir.name}")
        print(f"{shlex.join(argv)}\n[medagentgym] wrote {script}")
        return L.submit(script) if s.slurm.submit and not s.dry_run else 0
    return L.launch(argv, run_dir, s.dry_run, checks)
