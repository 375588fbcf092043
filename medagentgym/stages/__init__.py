"""Stages: thin entry points that meet at files on disk, never importing each other.

Each stage module defines ``Schema`` (a dataclass typing its ``stage.`` node, registered in the
ConfigStore as ``schema/stage/<name>``) and ``run(cfg) -> int`` (the process exit code; the run dir is
``HydraConfig.get().runtime.output_dir``). ``NEEDS_MODEL = True`` makes the CLI require +model=.
Stage modules must import cheaply: heavy libraries are imported inside ``run``.
"""

from __future__ import annotations

import importlib
from types import ModuleType

# stage name (as typed in stage=NAME) -> module under medagentgym.stages
STAGES: dict[str, str] = {
    "evaluate": "evaluate",
    "build-sft-data": "build_sft_data",
    "sft": "sft",
    "dpo": "dpo",
    "iterative-dpo": "iterative_dpo",
}


def stage_module(name: str) -> ModuleType:
    return importlib.import_module(f"medagentgym.stages.{STAGES[name]}")
