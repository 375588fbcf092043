"""The primary structured-config schema.

Every YAML file under conf/ is validated against these dataclasses when Hydra composes, so a typo in a
key or a wrong type fails at compose time with Hydra's own message. Group files extend the schema
typed by its field in ``Config``. Stages differ in their parameters, so each stage YAML extends its own
schema (stored under ``schema/stage/``) through its defaults list.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING, OmegaConf


@dataclass
class ModelConfig:
    """An LLM endpoint. Only names of secrets live here (``api_key_env``), never their values."""

    provider: str = MISSING  # openai | azure | openai_compatible | local | oracle
    name: str = MISSING  # the model id sent to the API (Azure: the deployment name)
    base_url: str | None = None
    api_key_env: str | None = None
    azure_endpoint: str | None = None
    azure_endpoint_env: str | None = None
    api_version: str | None = None
    temperature: float | None = 0.0  # null: the model takes no temperature (o-series)
    max_new_tokens: int = 8192
    # Which request field carries max_new_tokens: reasoning models take max_completion_tokens.
    max_tokens_param: str = "max_tokens"
    max_input_tokens: int = 8192
    max_total_tokens: int = 32768
    log_probs: bool = False
    reasoning_effort: str | None = None
    n_retry: int = 3
    retry_delay: float = 10.0
    max_retry_delay: float = 120.0
    request_timeout: float = 600.0
    price_prompt_per_mtok: float | None = None
    price_completion_per_mtok: float | None = None
    # Constrained decoding of action JSON: none | grammar (llama.cpp GBNF) | json_object (llama.cpp schema)
    # | json_schema (vLLM, SGLang, llama-server) | guided_json (vLLM extra_body). See medagentgym.llm.constrained.
    constrained: str = "none"
    extra_body: dict[str, Any] = field(default_factory=dict)
    # The model that answers the `debug` action: a model config name, null = this model.
    debugger: str | None = None
    # Local llama.cpp server (provider=local): GGUF path (null = packaged SmolLM2), reuse URL, threads.
    path: str | None = None
    server_url: str | None = None
    n_threads: int | None = None
    n_ctx: int = 8192


@dataclass
class TaskConfig:
    name: str = MISSING
    # "module:Class" implementing medagentgym.tasks.base.Task; each task module owns its dataset.
    impl: str = MISSING
    data_dir: str | None = None  # null: ${data.root}/<name>
    actions: list[str] = field(default_factory=lambda: ["validate_code", "debug", "terminal"])
    options: dict[str, Any] = field(default_factory=dict)


@dataclass
class DataConfig:
    kind: str = "real"  # real | sample
    root: str = "data"


@dataclass
class EnvConfig:
    num_steps: int = 15
    reveal_verdict: bool = True
    max_episode_seconds: float = 1800.0
    max_observation_chars: int = 4000
    loop_threshold: int = 3  # the same action this many times in a row flags a loop


@dataclass
class SandboxConfig:
    backend: str = "auto"  # auto | process | bwrap
    timeout: float = 120.0
    cpu_time: float | None = None  # seconds; null = timeout + 5
    memory_mb: int = 4096
    max_processes: int = 64
    max_file_mb: int = 1024
    max_open_files: int = 256
    max_output_bytes: int = 1_000_000
    keep_workspace: bool = False
    network: bool = False
    python: str | None = None  # another interpreter for task-specific stacks
    preload: list[str] = field(default_factory=lambda: ["numpy", "pandas", "sqlite3"])
    threads: int = 1
    # false: a fresh interpreter per execution instead of a fork of the warm server (slower; for code
    # where forking a process that imported the scientific stack is unsafe).
    warm: bool = True
    workspace_root: str | None = None  # where per-episode workspaces go; null: the system temp dir
    # Extra host paths the isolating backend mounts read-only (e.g. shared libraries of sandbox.python).
    bind_readonly: list[str] = field(default_factory=list)


@dataclass
class RunConfig:
    split: str = "test"
    start_idx: int = 0
    end_idx: int = -1  # -1: every record in the task file
    num_rollouts: int = 1
    rollout_temperature: float = 0.6
    seed: int = 0


@dataclass
class LauncherConfig:
    name: str = "sequential"  # sequential | joblib | ray
    n_jobs: int = 1
    prefer: str = "threads"  # joblib backend preference
    address: str | None = None  # ray: null = local, "auto" or ray://host:port to join
    progress: bool = True


@dataclass
class StageConfig:
    """Fields every stage has; each stage's YAML adds its own parameters under ``stage.``."""

    name: str = MISSING


@dataclass
class Config:
    model: ModelConfig = MISSING
    task: TaskConfig = MISSING
    data: DataConfig = field(default_factory=DataConfig)
    env: EnvConfig = field(default_factory=EnvConfig)
    sandbox: SandboxConfig = field(default_factory=SandboxConfig)
    run: RunConfig = field(default_factory=RunConfig)
    launcher: LauncherConfig = field(default_factory=LauncherConfig)
    # Stages differ in their parameters, so the stage node is typed by its own YAML, not here.
    stage: Any = MISSING
    credentials_path: str | None = None
    models_dir: str | None = None  # where debugger model configs are looked up; null: the conf dir


def run_label(stage: str, model: str, task: str) -> str:
    """The run dir's suffix: <model>_<task> for evaluations, the stage name for the other stages."""
    return f"{model}_{task}" if stage == "evaluate" else stage


def register_configs() -> None:
    from medagentgym.stages import STAGES, stage_module

    OmegaConf.register_new_resolver("mag_run_label", run_label, replace=True)
    cs = ConfigStore.instance()
    cs.store(name="config_schema", node=Config)
    for name in STAGES:
        cs.store(group="schema/stage", name=name, node=stage_module(name).Schema)


def conf_dir() -> Path:
    """The config directory: the copy packaged in the wheel first, else the repository's conf/."""
    here = Path(__file__).resolve().parent
    packaged = here / "conf"
    if (packaged / "config.yaml").is_file():
        return packaged
    return here.parent / "conf"
