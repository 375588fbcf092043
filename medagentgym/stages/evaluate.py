"""stage=evaluate (the default): run the configured model on the configured task and write results."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

NEEDS_MODEL = True


@dataclass
class Schema:
    name: str = "evaluate"


def run(cfg: DictConfig) -> int:
    from medagentgym.runner.evaluate import evaluate

    hc = HydraConfig.get()
    return evaluate(cfg, Path(hc.runtime.output_dir), hc.runtime.choices.get("model"))
