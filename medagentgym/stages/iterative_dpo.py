"""stage=iterative-dpo: SFT warm-up, then R rounds of sampling from the latest policy and DPO on its outcomes."""

from __future__ import annotations

from dataclasses import dataclass, field

from omegaconf import DictConfig


@dataclass
class ServerSchema:
    url: str | None = None  # an OpenAI-compatible server already serving the policy; null: start `command`
    # Started per round with the policy's Hugging Face dir; {model}, {port} and {name} are filled in.
    command: list[str] = field(
        default_factory=lambda: ["vllm", "serve", "{model}", "--port", "{port}", "--served-model-name", "{name}"]
    )
    port: int = 8000
    model_name: str = "policy"
    startup_timeout: float = 900.0


@dataclass
class Schema:
    name: str = "iterative-dpo"
    inputs: list[str] = field(default_factory=list)  # evaluate run/sweep dirs: successes for the SFT warm-up
    workdir: str | None = None  # null: the Hydra run dir; rerun with the same workdir to resume
    dry_run: bool = False  # print every step's command and exit
    base_model: str = "Qwen/Qwen2.5-7B-Instruct"
    warmup_n: int = 100  # random successful trajectories for the SFT warm-up
    rounds: int = 1
    rollouts: int = 8  # samples per training task instance and round
    split: str = "train"  # the task split sampled for preference pairs
    server: ServerSchema = field(default_factory=ServerSchema)
    # Extra arguments for each step's CLI run, e.g. eval_overrides=[task=mimic_iii,run.split=train].
    eval_overrides: list[str] = field(default_factory=list)
    build_overrides: list[str] = field(default_factory=list)
    sft_overrides: list[str] = field(default_factory=list)
    dpo_overrides: list[str] = field(default_factory=list)


def run(cfg: DictConfig) -> int:
    from pathlib import Path

    from medagentgym.training.iterative import run_pipeline
    from medagentgym.training.launch import stage_run_dir

    s = cfg.stage
    workdir = Path(s.workdir).expanduser().resolve() if s.workdir else stage_run_dir(None)
    return run_pipeline(s, workdir, s.dry_run)
