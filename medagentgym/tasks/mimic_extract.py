"""MIMIC-Extract: ICU outcome and intervention prediction from hourly lab measurements.

Layout (the original release's): ``test_tasks.jsonl`` (used for both modes; the release's
``train_tasks.jsonl`` is a subset of it) and, under each row's ``feature_label_directory``:
``X_lab_{split}.pkl`` (hourly measurements: subject_id, hadm_id, icustay_id, hours_in, then count/mean/std
per measurement), for the intervention tasks also ``X_static_{split}.pkl`` (demographics), and
``{split}_{task_name}_labels.csv``. Admission-level tasks label ``subject_id`` with a boolean column named
after the task; the window tasks (vasopressor, ventilation) label (subject_id, 6_hour_window_id) with an
``intervention_category``. Every test label file is hidden from agent code.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from medagentgym.errors import TaskFileError
from medagentgym.grading.answers import to_number
from medagentgym.grading.predictions import (
    Key,
    collect,
    normalize_id,
    pick_column,
    read_csv,
)
from medagentgym.sandbox.base import SandboxSpec
from medagentgym.tasks.prediction_task import (
    NEAREST_NEIGHBOUR_SRC,
    PredictionTask,
    balanced_groups,
    group_features,
    label_map,
    require_columns,
    write_jsonl,
)
from medagentgym.types import TaskInstance

SPLITS = ("train", "val", "test")
WINDOW_TASKS = ("vasopressor", "ventilation")
WINDOW_COLUMN = "6_hour_window_id"
# The real pickles' measurement column names are not published, so the prompt asks the agent to look.
_LAB_LAYOUT = (
    "X_lab files hold hourly measurements (columns subject_id, hadm_id, icustay_id, hours_in, then a count, "
    "mean and std per measurement; inspect a frame for the exact names)"
)
MEASUREMENTS = ("heart_rate", "glucose", "sodium", "potassium", "hemoglobin", "ph")


class MimicExtract(PredictionTask):
    name = "mimic_extract"
    split_files: ClassVar[dict[str, str]] = {"test": "test_tasks.jsonl", "train": "test_tasks.jsonl"}

    def required_files(self, split: str) -> list[str]:
        files = super().required_files(split)
        if (self.data_dir / self.split_files[split]).exists():
            for rec in self.read_records(split):
                folder, name = self._folder(rec), rec.get("task_name")
                files += [f"{folder}/{f}" for f in self._feature_files(name)]
                files += [f"{folder}/{s}_{name}_labels.csv" for s in SPLITS]
        return list(dict.fromkeys(files))

    def how_to_obtain(self) -> str:
        return (
            "MIMIC-Extract features are derived from MIMIC-III (PhysioNet credentialed access); the "
            "MedAgentGym authors hand out the prepared pickles and label CSVs on request."
        )

    @staticmethod
    def _folder(record: dict[str, Any]) -> str:
        return str(record.get("feature_label_directory", "")).removeprefix("./").strip("/")

    @staticmethod
    def _feature_files(task_name: str) -> list[str]:
        kinds = ("X_lab", "X_static") if task_name in WINDOW_TASKS else ("X_lab",)
        return [f"{k}_{s}.pkl" for k in kinds for s in SPLITS]

    def make_instance(self, split: str, index: int, record: dict[str, Any]) -> TaskInstance:
        name, description, folder = record.get("task_name"), record.get("task_description"), self._folder(record)
        if not isinstance(name, str) or not name or not isinstance(description, str) or not folder:
            raise TaskFileError(
                f"mimic_extract task file row {index} needs task_name, task_description and "
                "feature_label_directory; use the original release's test_tasks.jsonl."
            )
        d, out = self.data_dir / folder, self.prediction_file_for(name)
        files = ", ".join(f"{d / f}" for f in self._feature_files(name))
        labels = ", ".join(f"{d / f'{s}_{name}_labels.csv'}" for s in ("train", "val"))
        if name in WINDOW_TASKS:
            layout = (
                f"{_LAB_LAYOUT}; X_static files hold one row of demographics per stay. Label CSVs have columns "
                f"subject_id, {WINDOW_COLUMN}, intervention_category, label_type; window w is predicted from "
                "hours_in 6w..6w+5 of that subject."
            )
            header = "subject_id,window_idx,prediction (one row per subject and window)"
        else:
            layout = (
                f"{_LAB_LAYOUT}. Label CSVs have columns subject_id, hadm_id, {name}, label_type; one label "
                "per subject."
            )
            header = "subject_id,prediction (one row per subject)"
        goal = (
            f"Prediction task `{name}`: {description.strip()}\n\n"
            f"Features (pickled pandas DataFrames; train, validation, test): {files}.\n"
            f"Labels (train, validation): {labels}. Test labels are not available to you.\n{layout}\n\n"
            f"Train a model and write its predicted labels (not probabilities) for every test subject to ./{out} "
            f"in your working directory, as CSV with the header {header}. Predictions use the same values as "
            "the label files. You are scored by accuracy over all test labels; a missing prediction counts as wrong."
        )
        ctx = {"task_name": name, "folder": folder}
        return TaskInstance(self.name, split, index, str(index), goal, ctx, record)

    def instruction(self) -> str:
        return (
            "You solve machine-learning tasks on ICU data. Write Python that loads the given features and "
            "labels, trains a model, and writes the requested prediction file. A constant or random prediction "
            "does not count as a solution: the accuracy must beat always predicting the most common label and "
            "reach the task's reference accuracy. Read the data files only from the paths given; do not "
            "modify them. Print whatever you want to see, and set `answer` to the path of the file you wrote."
        )

    @staticmethod
    def prediction_file_for(task_name: str) -> str:
        return f"predictions-{task_name}.csv"

    def prediction_file(self, inst: TaskInstance) -> str:
        return self.prediction_file_for(inst.context["task_name"])

    def min_accuracy(self, inst: TaskInstance) -> float | None:
        """options.success_accuracy when set, else the reference model's accuracy from the task file."""
        if self.options.get("success_accuracy") is not None:
            return super().min_accuracy(inst)
        perf = inst.record.get("performance")
        return to_number(perf.get("ACC")) if isinstance(perf, dict) else None

    def sandbox_spec(self, inst: TaskInstance) -> SandboxSpec:
        d = self.data_dir
        files = sorted(p for p in d.glob("*/*") if p.is_file())
        hidden = [d / f for f in set(self.split_files.values())] + sorted(d.glob("*/test_*_labels.csv"))
        public = [p for p in files if p not in hidden]
        hidden += [d / "train_tasks.jsonl"] if (d / "train_tasks.jsonl").exists() else []
        return SandboxSpec(readonly_paths=public, hidden_paths=hidden)

    def _labels(self, inst: TaskInstance, split: str) -> Path:
        name = inst.context["task_name"]
        return self.data_dir / inst.context["folder"] / f"{split}_{name}_labels.csv"

    def gold_units(self, inst: TaskInstance) -> dict[Key, str]:
        rows, name = read_csv(self._labels(inst, "test")), inst.context["task_name"]
        if name in WINDOW_TASKS:
            return collect(
                rows, lambda r: (normalize_id(r["subject_id"]), normalize_id(r[WINDOW_COLUMN])), "intervention_category"
            )
        return collect(rows, lambda r: (normalize_id(r["subject_id"]),), name)

    def predicted_units(self, inst: TaskInstance, rows: list[dict[str, str]], gold: dict[Key, str]) -> dict[Key, str]:
        rel = self.prediction_file(inst)
        sid, value = pick_column(rows, ("subject_id",)), pick_column(rows, ("prediction",))
        if inst.context["task_name"] not in WINDOW_TASKS:
            require_columns(rows, rel, subject_id=sid, prediction=value)
            return collect(rows, lambda r: (normalize_id(r.get(sid, "")),), value)
        window = pick_column(rows, ("window_idx", WINDOW_COLUMN))
        require_columns(rows, rel, subject_id=sid, window_idx=window, prediction=value)
        return collect(rows, lambda r: (normalize_id(r.get(sid, "")), normalize_id(r.get(window, ""))), value)

    def oracle_code(self, inst: TaskInstance) -> str:
        name = inst.context["task_name"]
        windowed = name in WINDOW_TASKS
        keys = '["subject_id", "window_idx"]' if windowed else '["subject_id"]'
        label_keys = f'["subject_id", {WINDOW_COLUMN!r}]' if windowed else '["subject_id"]'
        target = "intervention_category" if windowed else name
        return f"""import numpy as np
import pandas as pd
{NEAREST_NEIGHBOUR_SRC}
D, T = {str(self.data_dir / inst.context["folder"])!r}, {name!r}

def features(split):
    lab = pd.read_pickle(f"{{D}}/X_lab_{{split}}.pkl")
    lab["window_idx"] = lab["hours_in"] // 6
    cols = [c for c in lab.columns if str(c).endswith("_mean")]
    return lab.groupby({keys})[cols].mean()

X, y = [], []
for split in ("train", "val"):
    feats = features(split)
    lookup = {{(k if isinstance(k, tuple) else (k,)): v for k, v in zip(feats.index, feats.to_numpy())}}
    labels = pd.read_csv(f"{{D}}/{{split}}_{{T}}_labels.csv")
    X += [lookup[tuple(k)] for k in labels[{label_keys}].itertuples(index=False)]
    y += list(labels[{target!r}])
test = features("test")
out = {self.prediction_file_for(name)!r}
frame = test.index.to_frame(index=False)
frame["prediction"] = fit_predict(X, y, test.to_numpy())
frame.to_csv(out, index=False)
answer = out
"""

    # ---- sample ------------------------------------------------------------------------------------
    @classmethod
    def make_sample(cls, out_dir: Path) -> None:
        rng = np.random.default_rng(4321)
        rows = []
        folders = {"mortality_los": ("mort_icu", "los_7", "mort_hosp", "los_3"), "vasopressor_ventilation": WINDOW_TASKS}
        for folder, tasks in folders.items():
            (out_dir / folder).mkdir()
            windowed = folder == "vasopressor_ventilation"
            n_groups = 5
            centres = rng.normal(0.0, 4.0, size=(n_groups, len(MEASUREMENTS)))
            values = ["CONTROL", "ON INTERVENTION", "ONSET", "WEAN"] if windowed else [False, True]
            maps = {t: label_map(rng, n_groups, values) for t in tasks}
            test_labels: dict[str, list[Any]] = {}
            subject = 100
            for split, n in zip(SPLITS, (30, 10, 16)):
                subjects = np.arange(subject, subject + n)
                subject += n
                n_windows = rng.integers(2, 4, size=n) if windowed else np.ones(n, dtype=int)
                units = [(s, w) for s, k in zip(subjects, n_windows) for w in range(k)]
                groups = balanced_groups(rng, len(units), n_groups)
                hours = 6 if windowed else 8
                lab = _hourly(rng, units, groups, centres, hours)
                lab.to_pickle(out_dir / folder / f"X_lab_{split}.pkl")
                if windowed:
                    _static(rng, subjects).to_pickle(out_dir / folder / f"X_static_{split}.pkl")
                for t in tasks:
                    vals = [maps[t][g] for g in groups]
                    if windowed:
                        frame = pd.DataFrame({"subject_id": [s for s, _ in units], WINDOW_COLUMN: [w for _, w in units]})
                        frame["intervention_category"] = vals
                    else:
                        frame = pd.DataFrame({"subject_id": subjects, "hadm_id": subjects + 50000, t: vals})
                    frame["label_type"] = "categorical" if windowed else "boolean"
                    frame.to_csv(out_dir / folder / f"{split}_{t}_labels.csv", index=False)
                    test_labels[t] = vals
            for t in tasks:
                majority = pd.Series([str(v) for v in test_labels[t]]).value_counts().iloc[0] / len(test_labels[t])
                rows.append(
                    {
                        "task_name": t,
                        "task_description": f"Synthetic sample: predict {t.replace('_', ' ')} from lab measurements.",
                        "task_category": "classification",
                        "feature_label_directory": f"./{folder}",
                        "model": "majority class",
                        "performance": {"ACC": float(majority)},
                    }
                )
        write_jsonl(out_dir / "test_tasks.jsonl", rows)
        write_jsonl(out_dir / "train_tasks.jsonl", rows[:3])


def _hourly(rng, units, groups, centres, hours: int) -> pd.DataFrame:
    """Hourly rows for each (subject, window) unit; the unit's group sets every measurement's mean."""
    records = []
    for (subject, window), g in zip(units, groups):
        means = group_features(rng, np.full(hours, g), centres, 0.3)
        for h in range(hours):
            row = {"subject_id": int(subject), "hadm_id": int(subject) + 50000, "icustay_id": int(subject) + 90000,
                   "hours_in": window * hours + h}
            for j, m in enumerate(MEASUREMENTS):
                row[f"{m}_count"] = int(rng.integers(1, 4))
                row[f"{m}_mean"] = float(means[h, j])
                row[f"{m}_std"] = float(abs(rng.normal(0.0, 0.2)))
            records.append(row)
    return pd.DataFrame(records)


def _static(rng, subjects) -> pd.DataFrame:
    female = rng.integers(0, 2, size=len(subjects)).astype(bool)
    age = rng.integers(1, 5, size=len(subjects))
    frame = pd.DataFrame({"subject_id": subjects, "hadm_id": subjects + 50000, "icustay_id": subjects + 90000,
                          "intime": rng.integers(12, 200, size=len(subjects)), "gender_F": female, "gender_M": ~female})
    for a in range(1, 5):
        frame[f"Age {a}.0"] = age == a
    return frame
