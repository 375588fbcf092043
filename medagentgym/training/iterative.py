"""Iterative DPO: SFT warm-up, then rounds of (serve policy -> sample rollouts -> pair outcomes -> DPO).

Every step is one run of our own CLI in a named directory under the pipeline's work dir, so stages still meet
only at files on disk. A step that finishes writes a `.done` marker; rerunning the pipeline skips finished
steps and resumes at the first unfinished one (evaluate itself resumes inside its run dir).

    workdir/00_warmup_data  01_sft  round_1/{rollouts,data,dpo}  round_2/...
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from medagentgym.errors import UserError
from medagentgym.training.launch import resolve_model

DONE = ".done"


@dataclass
class Step:
    name: str  # the directory under the work dir
    argv: list[str]  # our CLI's arguments
    serve: str | None = None  # a model dir to serve while this step runs (rollouts)

    def done(self, workdir: Path) -> bool:
        return (workdir / self.name / DONE).is_file()


def server_url(server: Any) -> str:
    return server.url or f"http://127.0.0.1:{server.port}/v1"


def _cli(stage: str, run_dir: Path, *args: str) -> list[str]:
    return [f"stage={stage}", f"hydra.run.dir={run_dir}", *args]


def _list(values: list[str]) -> str:
    return "[" + ",".join(str(v) for v in values) + "]"


def plan(s: Any, workdir: Path) -> list[Step]:
    """All steps of the pipeline, in order; `s` is the iterative-dpo stage config."""
    if not s.inputs:
        raise UserError(
            "stage.inputs is empty: name the evaluate run or sweep dirs whose successes seed the SFT warm-up."
        )
    if s.rounds < 1 or s.rollouts < 1:
        raise UserError("stage.rounds and stage.rollouts must be at least 1.")
    warm, sft = workdir / "00_warmup_data", workdir / "01_sft"
    steps = [
        Step(warm.name, _cli("build-sft-data", warm, f"stage.inputs={_list(s.inputs)}", f"stage.first_n={s.warmup_n}",
                             "stage.dpo=false", *s.build_overrides)),
        Step(sft.name, _cli("sft", sft, f"stage.train_files={warm}", f"stage.model_path={s.base_model}",
                            *s.sft_overrides)),
    ]
    policy = sft
    for r in range(1, s.rounds + 1):
        rd = workdir / f"round_{r}"
        rollouts, data, dpo = rd / "rollouts", rd / "data", rd / "dpo"
        sample = ["stage=evaluate", f"hydra.run.dir={rollouts}", "+model=openai_compatible",
                  f"model.base_url={server_url(s.server)}", f"model.name={s.server.model_name}",
                  f"run.num_rollouts={s.rollouts}", f"run.split={s.split}", *s.eval_overrides]
        steps.append(Step(f"{rd.name}/rollouts", sample, serve=str(policy)))
        steps.append(Step(f"{rd.name}/data", _cli("build-sft-data", data, f"stage.inputs=[{rollouts}]",
                                                   "stage.sft=false", *s.build_overrides)))
        # The SFT model stays the frozen reference in every round; the policy is the previous round's output.
        steps.append(Step(f"{rd.name}/dpo", _cli("dpo", dpo, f"stage.dataset={data}", f"stage.model_path={policy}",
                                                 f"stage.ref_model_path={sft}", *s.dpo_overrides)))
        policy = dpo
    return steps


def _wait_ready(url: str, proc: subprocess.Popen, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise UserError(f"The model server exited with code {proc.returncode} before it was ready; see its log.")
        try:
            with urllib.request.urlopen(url.rstrip("/") + "/models", timeout=5):
                return
        except urllib.error.HTTPError:
            return  # it answered HTTP: up, even if it does not list models
        except OSError:
            pass
        time.sleep(1.0)
    raise UserError(
        f"The model server at {url} was not ready after {timeout:.0f} s; raise stage.server.startup_timeout."
    )


class Server:
    """Starts stage.server.command for one model directory and stops it (the whole process group) after."""

    def __init__(self, s: Any, model_dir: str, log_path: Path):
        self.s, self.model_dir, self.log_path = s, model_dir, log_path
        self.proc: subprocess.Popen | None = None

    def __enter__(self) -> Server:
        if self.s.url:  # an external server: the user keeps it serving the current policy
            print(f"[iterative-dpo] using {self.s.url}; it must serve {self.model_dir}", flush=True)
            return self
        model = resolve_model(self.model_dir)
        argv = [a.format(model=model, port=self.s.port, name=self.s.model_name) for a in self.s.command]
        print(f"[iterative-dpo] serving: {shlex.join(argv)}", flush=True)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "a")
        self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        _wait_ready(server_url(self.s), self.proc, self.s.startup_timeout)
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


def run_cli(argv: list[str]) -> int:
    return subprocess.run([sys.executable, "-m", "medagentgym", *argv]).returncode


def run_pipeline(s: Any, workdir: Path, dry_run: bool, runner: Callable[[list[str]], int] = run_cli) -> int:
    """Runs the unfinished steps in order; returns the first non-zero exit code, else 0."""
    steps = plan(s, workdir)
    for step in steps:
        line = shlex.join([sys.executable, "-m", "medagentgym", *step.argv])
        if step.done(workdir):
            print(f"[iterative-dpo] {step.name}: done, skipped", flush=True)
            continue
        print(f"[iterative-dpo] {step.name}: {line}", flush=True)
        if dry_run:
            continue
        if step.serve:
            with Server(s.server, step.serve, workdir / step.name / "server.log"):
                code = runner(step.argv)
        else:
            code = runner(step.argv)
        if code != 0:
            print(f"[iterative-dpo] {step.name} failed with exit code {code}; rerun to resume here.", flush=True)
            return code
        (workdir / step.name).mkdir(parents=True, exist_ok=True)
        (workdir / step.name / DONE).write_text("")
    return 0
