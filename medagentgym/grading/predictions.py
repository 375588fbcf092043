"""Scoring a prediction CSV the agent wrote against hidden test labels.

Accuracy is taken over every labelled test unit: a unit without a prediction counts as wrong, and a unit
predicted twice with different values counts as wrong, so neither a few confident rows nor a dump of every
class can score. The success rule needs the accuracy to beat always predicting the most common test label.
"""

from __future__ import annotations

import csv
import datetime as dt
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from medagentgym.grading.answers import to_number

# A prediction file larger than this is not a prediction file; reading it would only stall the grader.
MAX_PREDICTION_BYTES = 64 * 1024 * 1024
_TENSOR = re.compile(r"tensor\((.*)\)", re.IGNORECASE)
# Marks a unit that was predicted more than once with different values: never equal to a label.
CONFLICT = "\x00conflict"

Key = tuple[str, ...]


class PredictionFileError(ValueError):
    """The agent's prediction file is missing or unreadable; the message is shown to the agent."""


@dataclass
class PredictionScore:
    n_units: int  # labelled test units
    n_predicted: int  # units that received a prediction
    n_correct: int
    baseline: float  # accuracy of always predicting the most common test label

    @property
    def accuracy(self) -> float:
        return self.n_correct / self.n_units if self.n_units else 0.0

    def summary(self) -> str:
        return (
            f"accuracy {self.accuracy:.4f} ({self.n_correct}/{self.n_units} test units correct, "
            f"{self.n_units - self.n_predicted} without a prediction); "
            f"most-common-label baseline {self.baseline:.4f}"
        )


def normalize_id(value: str) -> str:
    """An identifier as text: 'tensor(42)' and '42.0' are both '42'."""
    text = value.strip()
    m = _TENSOR.fullmatch(text)
    if m:
        text = m.group(1).strip()
    x = to_number(text)
    if x is not None and x.is_integer():
        return str(int(x))
    return text


def normalize_label(value: str) -> str:
    """A label as comparable text: booleans as 0/1, whole numbers as integers, other text lower-cased."""
    text = normalize_id(value).lower()
    if text in ("true", "false"):
        return "1" if text == "true" else "0"
    x = to_number(text)
    if x is not None:
        return str(int(x)) if x.is_integer() else repr(x)
    return " ".join(text.split())


def normalize_time(value: str) -> str:
    """A timestamp in one spelling ('2020-01-01 23:59:00' == '2020-01-01T23:59:00'), else the stripped text."""
    text = value.strip()
    try:
        return dt.datetime.fromisoformat(text).isoformat()
    except ValueError:
        return text


def read_csv(path: Path) -> list[dict[str, str]]:
    """Rows of a CSV with header names and cells stripped (the original examples put spaces after commas)."""
    with open(path, newline="", encoding="utf-8", errors="replace") as fh:
        reader = csv.reader(fh, skipinitialspace=True)
        header = [h.strip() for h in next(reader, [])]
        return [
            {h: (cell.strip() if cell is not None else "") for h, cell in zip(header, row)}
            for row in reader
            if any(c.strip() for c in row)
        ]


def read_prediction_file(workspace: Path, relpath: str) -> list[dict[str, str]]:
    """The agent's prediction CSV at workspace/relpath. Only a regular file inside the workspace counts: a
    symlink could point the host-side grader at the hidden labels."""
    path = Path(workspace) / relpath
    if path.is_symlink() or not path.is_file():
        raise PredictionFileError(f"No prediction file at ./{relpath} in your working directory.")
    if not path.resolve().is_relative_to(Path(workspace).resolve()):
        raise PredictionFileError(f"./{relpath} must be a file inside your working directory.")
    if path.stat().st_size > MAX_PREDICTION_BYTES:
        raise PredictionFileError(f"./{relpath} is larger than {MAX_PREDICTION_BYTES // 2**20} MiB.")
    try:
        return read_csv(path)
    except (OSError, csv.Error) as exc:
        raise PredictionFileError(f"./{relpath} is not a readable CSV file ({exc}).") from None


def pick_column(rows: list[dict[str, str]], names: Iterable[str]) -> str | None:
    """The first of ``names`` (case-insensitive) that the rows' header has."""
    header = {h.lower(): h for h in (rows[0] if rows else {})}
    for name in names:
        if name.lower() in header:
            return header[name.lower()]
    return None


def collect(rows: list[dict[str, str]], key_of, value_column: str) -> dict[Key, str]:
    """key -> normalised value; a key given two different values maps to CONFLICT."""
    out: dict[Key, str] = {}
    for row in rows:
        key, value = key_of(row), normalize_label(row.get(value_column, ""))
        out[key] = value if out.get(key, value) == value else CONFLICT
    return out


def score(gold: dict[Key, str], predicted: dict[Key, str]) -> PredictionScore:
    """Accuracy over every gold unit; gold values must already be normalised."""
    counts = Counter(gold.values())
    n_predicted = sum(1 for k in gold if k in predicted)
    n_correct = sum(1 for k, v in gold.items() if predicted.get(k) == v)
    baseline = counts.most_common(1)[0][1] / len(gold) if gold else 0.0
    return PredictionScore(len(gold), n_predicted, n_correct, baseline)


def success(result: PredictionScore, min_accuracy: float | None) -> tuple[bool, str]:
    """Correct iff the accuracy beats the constant-prediction baseline and reaches ``min_accuracy``."""
    if result.accuracy <= result.baseline:
        return False, f"{result.summary()}: not better than always predicting the most common label"
    if min_accuracy is not None and result.accuracy < min_accuracy:
        return False, f"{result.summary()}: below the required accuracy {min_accuracy:.4f}"
    return True, result.summary()
