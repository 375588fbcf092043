"""Task environments. ``build_task`` turns the composed config into a ready Task (sample data made on demand)."""

from __future__ import annotations

from pathlib import Path

from medagentgym.config import DataConfig, TaskConfig
from medagentgym.tasks.base import Task, load_task_class
from medagentgym.tasks.sample import ensure_sample


def build_task(task_cfg: TaskConfig, data_cfg: DataConfig) -> Task:
    cls = load_task_class(task_cfg.impl)
    if task_cfg.data_dir:
        data_dir = Path(task_cfg.data_dir)
    else:
        data_dir = Path(data_cfg.root) / task_cfg.name
    if data_cfg.kind == "sample":
        ensure_sample(cls, data_dir)
    return cls(task_cfg, data_dir)


__all__ = ["Task", "build_task"]
