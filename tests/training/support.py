"""Helpers for the training tests: episode records written the way evaluate writes them, trainer venvs, a tiny model.

Trainer environments are found under .venvs/ beside the repo (scripts/setup_training_envs.sh), or under
MEDAGENTGYM_TRAINING_VENVS; tests that need one skip with the command that creates it.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from medagentgym.runner.records import EpisodeRecord, EpisodeWriter

REPO = Path(__file__).resolve().parents[2]
VENVS = Path(os.environ.get("MEDAGENTGYM_TRAINING_VENVS", REPO / ".venvs"))
HERE = Path(__file__).resolve().parent
SYSTEM = "You solve clinical coding tasks. Reply with one JSON action."


def goal(index: int) -> str:
    return f"Compute the score for patient {index}."


def reply(code: str) -> str:
    return json.dumps({"action": "validate_code", "params": {"code": code}})


def episode(index: int, rollout: int, status: str, *, answers: list[str] | None = None, model: str = "m",
            task: str = "medcalcbench", loop: bool = False, parse_failure: bool = False, score: float | None = None,
            run: str = "") -> EpisodeRecord:
    """A record as the runner writes it: system, goal, then (assistant reply, user observation) per step."""
    answers = answers if answers is not None else [f"answer = {index}"]
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": goal(index)}]
    steps: list[dict[str, Any]] = []
    for i, code in enumerate(answers):
        text = reply(code)
        messages += [{"role": "assistant", "content": text}, {"role": "user", "content": f"Output: {code[-3:]}"}]
        steps.append({"step": i, "reply": text, "action": None if parse_failure else "validate_code",
                      "params": {"code": code}, "observation": f"Output: {code[-3:]}"})
    return EpisodeRecord(
        task=task, split="test", index=index, rollout=rollout, task_id=f"{task}-{index}", model=model,
        temperature=0.6, messages=messages, steps=steps,
        outcome={"status": status, "score": (1.0 if status == "success" else 0.0) if score is None else score,
                 "reason": ""},
        loop=loop, usage={}, timings={}, config_hash="h", run=run,
    )


def write_run(run_dir: Path, records: list[EpisodeRecord]) -> Path:
    writer = EpisodeWriter(run_dir)
    for rec in records:
        writer.write(rec)
    writer.close()
    return run_dir


def venv_python(name: str) -> Path:
    python = VENVS / name / "bin" / "python"
    if not python.is_file():
        pytest.skip(f"no {name} environment at {VENVS / name}: create it with scripts/setup_training_envs.sh {name}")
    return python


def run_in(python: Path, args: list[str], timeout: float = 600, **kw) -> subprocess.CompletedProcess:
    env = {**os.environ, "TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
           "OMP_NUM_THREADS": "2", "WANDB_MODE": "disabled", **kw.pop("env", {})}
    return subprocess.run([str(python), *args], capture_output=True, text=True, timeout=timeout, env=env, **kw)
