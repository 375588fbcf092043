"""Shared shape of the two prediction tasks (ehrshot, mimic_extract): the agent trains a model on the
public features and labels and writes a prediction CSV into its workspace; the grader scores it against
test labels that agent code never sees.

Also the sample-data pieces both use: features drawn around well-separated group centres, so a fitted
nearest-neighbour model recovers every label, and labels that are fixed functions of the group.
"""

from __future__ import annotations

import json
from abc import abstractmethod
from pathlib import Path
from typing import Any

import numpy as np

from medagentgym.config import TaskConfig
from medagentgym.errors import UserError
from medagentgym.grading.answers import to_number
from medagentgym.grading.predictions import (
    Key,
    PredictionFileError,
    read_prediction_file,
    score,
    success,
)
from medagentgym.sandbox.base import Sandbox
from medagentgym.tasks.base import Task
from medagentgym.types import ExecResult, TaskInstance, Verdict

# The nearest-neighbour fit the oracle submits, shared by both tasks' oracle code: X/y train, Z to predict.
NEAREST_NEIGHBOUR_SRC = """
def fit_predict(X, y, Z):
    X, Z = np.asarray(X, dtype=float), np.asarray(Z, dtype=float)
    mu, sd = X.mean(axis=0), X.std(axis=0) + 1e-9
    X, Z = (X - mu) / sd, (Z - mu) / sd
    d = ((Z[:, None, :] - X[None, :, :]) ** 2).sum(axis=2)
    return [y[i] for i in d.argmin(axis=1)]
"""


class PredictionTask(Task):
    """A task graded by accuracy of a prediction CSV over all test units."""

    def __init__(self, cfg: TaskConfig, data_dir: Path):
        super().__init__(cfg, data_dir)
        bar = self.options.get("success_accuracy")
        if bar is not None and not (to_number(bar) is not None and 0 <= to_number(bar) <= 1):
            raise UserError(
                f"task.options.success_accuracy={bar!r} is not an accuracy; set a number between 0 and 1, "
                "or null for the default bar."
            )

    @abstractmethod
    def prediction_file(self, inst: TaskInstance) -> str:
        """Path of the prediction CSV relative to the agent's workspace."""

    @abstractmethod
    def gold_units(self, inst: TaskInstance) -> dict[Key, str]:
        """Test unit -> normalised label, read from the hidden test labels."""

    @abstractmethod
    def predicted_units(
        self, inst: TaskInstance, rows: list[dict[str, str]], gold: dict[Key, str]
    ) -> dict[Key, str]:
        """Test unit -> normalised prediction from the agent's CSV rows; PredictionFileError if unusable."""

    def min_accuracy(self, inst: TaskInstance) -> float | None:
        """The accuracy a success needs besides beating the baseline: options.success_accuracy when set."""
        return to_number(self.options.get("success_accuracy"))

    def grade(self, inst: TaskInstance, result: ExecResult, code: str, sandbox: Sandbox) -> Verdict:
        if not result.ok:
            return Verdict(False, 0.0, "the code did not run to completion, so no prediction file is graded")
        try:
            gold = self.gold_units(inst)
        except (OSError, KeyError, ValueError) as exc:
            return Verdict(False, 0.0, f"reading the test labels failed: {exc}", status="grader_error")
        if len(set(gold.values())) < 2:
            return Verdict(False, 0.0, "the test labels hold fewer than two classes", status="invalid_task")
        try:
            rows = read_prediction_file(sandbox.workspace, self.prediction_file(inst))
            predicted = self.predicted_units(inst, rows, gold)
        except PredictionFileError as exc:
            return Verdict(False, 0.0, str(exc), feedback=str(exc))
        result_score = score(gold, predicted)
        correct, reason = success(result_score, self.min_accuracy(inst))
        return Verdict(correct, result_score.accuracy, reason, feedback=reason)


def require_columns(rows: list[dict[str, str]], relpath: str, **columns: str | None) -> None:
    """PredictionFileError naming the columns the prediction file lacks (value None = not found)."""
    missing = [name for name, found in columns.items() if found is None]
    if not rows:
        raise PredictionFileError(f"./{relpath} has no data rows.")
    if missing:
        raise PredictionFileError(
            f"./{relpath} lacks the column(s) {', '.join(missing)}; its header is {list(rows[0])}."
        )


def group_features(rng: np.random.Generator, groups: np.ndarray, centres: np.ndarray, noise: float) -> np.ndarray:
    """One feature row per entry of ``groups``: that group's centre plus small Gaussian noise."""
    return centres[groups] + rng.normal(0.0, noise, size=(len(groups), centres.shape[1]))


def balanced_groups(rng: np.random.Generator, n: int, n_groups: int) -> np.ndarray:
    """Group ids covering every group about equally, in random order (so every split sees every class)."""
    return rng.permutation(np.arange(n) % n_groups)


def label_map(rng: np.random.Generator, n_groups: int, values: list[Any]) -> list[Any]:
    """A fixed group -> label mapping that uses every value at least once (when there are enough groups)."""
    base = list(values) + [values[int(i)] for i in rng.integers(0, len(values), size=max(0, n_groups - len(values)))]
    return [base[i] for i in rng.permutation(n_groups)]


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
