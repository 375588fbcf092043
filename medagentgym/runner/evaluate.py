"""The evaluate stage's body: build the task and model, resume, run episodes, write the summary."""

from __future__ import annotations

import hashlib
import json
import logging
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from medagentgym.config import Config, ModelConfig, conf_dir
from medagentgym.errors import ResumeConflictError, UserError
from medagentgym.llm import build_model
from medagentgym.llm.constrained import apply_constrained_decoding, unconstrained
from medagentgym.runner.episode import EpisodeSettings, run_episode
from medagentgym.runner.launchers import run_jobs
from medagentgym.runner.records import EPISODES_FILE, EpisodeWriter, iter_records, latest_by_key
from medagentgym.runner.summary import format_table, summarize, write_summary
from medagentgym.sandbox import create_sandbox
from medagentgym.tasks import Task, build_task
from medagentgym.types import TaskInstance

log = logging.getLogger(__name__)
META_FILE = "run_meta.json"

# Model settings that change what the model says; transport settings (URLs, retries) do not.
_MODEL_RESULT_KEYS = ("provider", "name", "temperature", "max_new_tokens", "max_tokens_param", "max_input_tokens",
                      "reasoning_effort", "constrained", "extra_body", "debugger", "path")


def result_fingerprint(cfg: DictConfig, task: Task) -> dict[str, Any]:
    """Everything that changes results; a resumed run must match it exactly."""
    model = OmegaConf.to_container(cfg.model, resolve=True)
    return {
        "model": {k: model.get(k) for k in _MODEL_RESULT_KEYS},
        "task": OmegaConf.to_container(cfg.task, resolve=True) | {"data_dir": None},
        "data_kind": cfg.data.kind,
        "env": {k: cfg.env[k] for k in ("num_steps", "reveal_verdict", "max_observation_chars")},
        "split": cfg.run.split,
        "rollout_temperature": cfg.run.rollout_temperature,
        "instruction_sha": hashlib.sha256(task.instruction().encode()).hexdigest()[:16],
    }


def fingerprint_hash(fp: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(fp, sort_keys=True, default=str).encode()).hexdigest()[:16]


def check_resume(run_dir: Path, fp: dict[str, Any]) -> None:
    meta = run_dir / META_FILE
    if meta.exists():
        old = json.loads(meta.read_text())["fingerprint"]
        if old != fp:
            diff = sorted(k for k in fp.keys() | old.keys() if fp.get(k) != old.get(k))
            raise ResumeConflictError(
                f"{run_dir} already holds results of a different configuration (differs in: {', '.join(diff)}). "
                "Resuming would mix incomparable episodes: run into a new directory (drop hydra.run.dir=) "
                "or restore the original settings."
            )
    else:
        tmp = meta.with_suffix(".tmp")
        tmp.write_text(json.dumps({"fingerprint": fp, "config_hash": fingerprint_hash(fp)}, indent=2))
        tmp.replace(meta)


def model_config_dirs() -> list[Path]:
    """conf/model plus the model dirs of any file:// entries in hydra.searchpath."""
    dirs = [conf_dir() / "model"]
    if HydraConfig.initialized():
        dirs += [Path(p.removeprefix("file://")) / "model" for p in HydraConfig.get().searchpath
                 if p.startswith("file://")]
    return dirs


def load_model_config(name: str) -> ModelConfig:
    """A model config by name (for the debugger), found where +model= would find it."""
    for d in model_config_dirs():
        if (d / f"{name}.yaml").is_file():
            node = OmegaConf.load(d / f"{name}.yaml")
            return OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(ModelConfig), node))
    names = sorted({p.stem for d in model_config_dirs() for p in d.glob("*.yaml")})
    raise UserError(f"model.debugger={name!r} is not a model config; choose one of: {', '.join(names)}.")


@dataclass
class Context:
    """What every episode of a run shares; built once per process (once per Ray worker)."""

    task: Task
    instances: dict[int, TaskInstance]
    model: Any
    debugger: Any
    settings: EpisodeSettings

    def run(self, job: tuple[int, int]):
        index, rollout = job
        return run_episode(self.task, self.instances[index], rollout, self.model, self.debugger, self.settings)

    def close(self) -> None:
        self.model.close()
        if self.debugger is not None and self.debugger is not self.model:
            self.debugger.close()


def build_context(cfg: DictConfig, run_name: str, debugger_cfg: ModelConfig | None) -> tuple[Context, dict[str, Any]]:
    task = build_task(OmegaConf.to_object(cfg.task), OmegaConf.to_object(cfg.data))
    instances = task.load(cfg.run.split)
    model_cfg: ModelConfig = OmegaConf.to_object(cfg.model)
    model = build_model(model_cfg, cfg.credentials_path, task)
    debugger = None
    if "debug" in task.actions and model_cfg.provider != "oracle":
        # The debugger answers in prose, so it never gets the action-JSON constraint.
        debugger = build_model(debugger_cfg, cfg.credentials_path, task) if debugger_cfg else unconstrained(model)
    apply_constrained_decoding(model, model_cfg, task.actions)
    fp = result_fingerprint(cfg, task)
    settings = EpisodeSettings(
        env=OmegaConf.to_object(cfg.env), sandbox=OmegaConf.to_object(cfg.sandbox),
        model_name=model_cfg.name, max_input_tokens=model_cfg.max_input_tokens,
        base_temperature=model_cfg.temperature, rollout_temperature=cfg.run.rollout_temperature,
        config_hash=fingerprint_hash(fp), run_name=run_name,
    )
    return Context(task, {i.index: i for i in instances}, model, debugger, settings), fp


_ray_context: dict[str, Context] = {}


def ray_episode(payload: dict[str, Any], index: int, rollout: int):
    """Runs inside a Ray worker: build the run's context once per worker process, then one episode."""
    key = payload["run_name"]
    if key not in _ray_context:
        debugger_cfg = payload["debugger"] and ModelConfig(**payload["debugger"])
        cfg = OmegaConf.merge(OmegaConf.structured(Config), payload["cfg"])  # typed again, as in the driver
        _ray_context[key] = build_context(cfg, key, debugger_cfg)[0]
    return _ray_context[key].run((index, rollout))


def select_jobs(n_instances: int, cfg: DictConfig, done: dict[tuple[int, int], Any]) -> list[tuple[int, int]]:
    end = n_instances if cfg.run.end_idx < 0 else min(cfg.run.end_idx, n_instances)
    if cfg.run.start_idx < 0 or cfg.run.start_idx > end:
        raise UserError(f"run.start_idx={cfg.run.start_idx} is outside 0..{end} (the task file has "
                        f"{n_instances} records in split {cfg.run.split!r}).")
    jobs = []
    for index in range(cfg.run.start_idx, end):
        for rollout in range(cfg.run.num_rollouts):
            prev = done.get((index, rollout))
            if prev is None or prev.is_infra_failure:
                jobs.append((index, rollout))
    return jobs


def evaluate(cfg: DictConfig, run_dir: Path, model_config_name: str | None = None) -> int:
    t0 = time.monotonic()
    run_dir.mkdir(parents=True, exist_ok=True)
    debugger_cfg = load_model_config(cfg.model.debugger) if cfg.model.debugger else None
    ctx, fp = build_context(cfg, run_dir.name, debugger_cfg)
    try:
        check_resume(run_dir, fp)
        done = latest_by_key(iter_records(run_dir / EPISODES_FILE))
        jobs = select_jobs(len(ctx.instances), cfg, done)
        log.info("task=%s split=%s model=%s: %d episodes to run (%d already finished)", ctx.task.name,
                 cfg.run.split, ctx.settings.model_name, len(jobs), len(done))
        if jobs:
            with create_sandbox(ctx.settings.sandbox, ctx.task.sandbox_spec(ctx.instances[jobs[0][0]])) as probe:
                log.info("sandbox: %s", probe.describe())
        writer = EpisodeWriter(run_dir)
        try:
            payload = {"cfg": OmegaConf.to_container(cfg, resolve=True), "run_name": run_dir.name,
                       "debugger": asdict(debugger_cfg) if debugger_cfg else None}
            interrupted = run_jobs(jobs, ctx.run, writer.write, OmegaConf.to_object(cfg.launcher), payload)
        finally:
            writer.close()
    finally:
        ctx.close()
    wanted = {j for j in select_jobs(len(ctx.instances), cfg, {})}
    records = [r for k, r in latest_by_key(iter_records(run_dir / EPISODES_FILE)).items() if k in wanted]
    summary = summarize(records, cfg.run.num_rollouts, wall_s=time.monotonic() - t0)
    summary.update({"task": ctx.task.name, "model": ctx.settings.model_name,
                    "model_config": model_config_name or ctx.settings.model_name, "split": cfg.run.split,
                    "complete": not interrupted and len(records) == len(wanted)})
    write_summary(run_dir, summary)
    print(format_table(summary, title=f"{ctx.task.name} / {ctx.settings.model_name} ({run_dir})"), flush=True)
    return 130 if interrupted else 0
