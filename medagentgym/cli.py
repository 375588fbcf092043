"""``python -m medagentgym`` / ``medagentgym``: compose the config, check it, hand over to the stage.

The config directory is resolved at import time (the copy packaged in the wheel first), so the entry
point works from a checkout, after ``pip install .``, and under ``python -m``. The working directory is
never changed. In a multirun, a failing job records ``error.json`` instead of raising, because Hydra
skips its end-of-sweep callback (the combined table) when a job raises.
"""

from __future__ import annotations

import json
import logging
import shutil
import sys
import traceback
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

from medagentgym.config import conf_dir, register_configs
from medagentgym.errors import UserError
from medagentgym.runner.report import ERROR_FILE
from medagentgym.stages import stage_module

log = logging.getLogger("medagentgym")
register_configs()
CONF_DIR = conf_dir()


def available_models() -> list[str]:
    return sorted(p.stem for p in (CONF_DIR / "model").glob("*.yaml"))


def missing_model_message() -> str:
    return (
        "No model chosen. Pick one with +model=NAME (note the plus sign: the model has no default), e.g. "
        "`python -m medagentgym +model=local task=medcalcbench data=sample`. Available models: "
        f"{', '.join(available_models())}. Any OpenAI-protocol server works with "
        "+model=openai_compatible model.base_url=URL model.name=NAME."
    )


def _record_error(run_dir: Path, cfg: DictConfig, message: str) -> None:
    choices = HydraConfig.get().runtime.choices
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / ERROR_FILE).write_text(json.dumps(
        {"error": message, "model_config": choices.get("model"), "task": choices.get("task")}, indent=2))


@hydra.main(config_path=str(CONF_DIR), config_name="config", version_base="1.3")
def _app(cfg: DictConfig) -> int:
    hc = HydraConfig.get()
    multirun = hc.mode == RunMode.MULTIRUN
    run_dir = Path(hc.runtime.output_dir)
    stage = stage_module(cfg.stage.name)
    try:
        if getattr(stage, "NEEDS_MODEL", False) and OmegaConf.is_missing(cfg, "model"):
            if not multirun:  # Hydra already made a run dir named after no model; it holds nothing of use
                shutil.rmtree(run_dir, ignore_errors=True)
            raise UserError(missing_model_message())
        rc = stage.run(cfg)
    except UserError as exc:
        if multirun:
            log.error("%s", exc)
            _record_error(run_dir, cfg, str(exc))
            return 2
        print(f"Error: {exc}", file=sys.stderr)
        sys.exit(2)
    except Exception as exc:
        if not multirun:
            raise
        log.error("job failed:\n%s", traceback.format_exc())
        _record_error(run_dir, cfg, f"{type(exc).__name__}: {exc}")
        return 1
    if rc and not multirun:
        sys.exit(rc)
    return rc


def main() -> None:
    _app()


if __name__ == "__main__":
    main()
