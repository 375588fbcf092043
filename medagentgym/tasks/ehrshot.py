"""EHRSHOT: few-shot clinical prediction tasks over pre-computed CLMBR patient embeddings.

Layout (the original release's): ``task.jsonl`` (one row per prediction task, used for both modes),
``clmbr_{train,val,test}.pkl`` (dicts with ``data_matrix``, ``patient_ids``, ``labeling_time``: one row per
patient and labeling time) and ``<task_name>/{train,val,test}_labels.csv`` (patient_id, value, label_type,
prediction_time). Every ``test_labels.csv`` is hidden from agent code.
"""

from __future__ import annotations

import datetime as dt
import pickle
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from medagentgym.errors import TaskFileError
from medagentgym.grading.predictions import (
    Key,
    collect,
    normalize_id,
    normalize_time,
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


class EHRShot(PredictionTask):
    name = "ehrshot"
    split_files: ClassVar[dict[str, str]] = {"test": "task.jsonl", "train": "task.jsonl"}
    public_files = tuple(f"clmbr_{s}.pkl" for s in SPLITS)

    def required_files(self, split: str) -> list[str]:
        files = super().required_files(split)
        task_file = self.data_dir / self.split_files[split]
        if task_file.exists():
            for rec in self.read_records(split):
                files += [f"{rec.get('task_name')}/{s}_labels.csv" for s in SPLITS]
        return files

    def how_to_obtain(self) -> str:
        return (
            "EHRSHOT (CLMBR features and task labels) is distributed by Stanford under a research data use "
            "agreement; the MedAgentGym authors hand out the prepared pickles and label CSVs on request."
        )

    def make_instance(self, split: str, index: int, record: dict[str, Any]) -> TaskInstance:
        name, description = record.get("task_name"), record.get("task_description")
        if not isinstance(name, str) or not name or not isinstance(description, str):
            raise TaskFileError(
                f"ehrshot task file row {index} needs string fields task_name and task_description; "
                "use the original release's task.jsonl."
            )
        d = self.data_dir
        out = self.prediction_file_for(name)
        goal = (
            f"Prediction task `{name}`.\n{description.strip()}\n\n"
            f"Features (pickled dicts with keys data_matrix, patient_ids, labeling_time; one row per patient "
            f"visit): {d / 'clmbr_train.pkl'} (train), {d / 'clmbr_val.pkl'} (validation), "
            f"{d / 'clmbr_test.pkl'} (test).\n"
            f"Labels (CSV columns patient_id, value, label_type, prediction_time; a label belongs to the "
            f"feature row with the same patient_id and labeling_time == prediction_time): "
            f"{d / name / 'train_labels.csv'} (train), {d / name / 'val_labels.csv'} (validation). "
            "Test labels are not available to you.\n\n"
            f"Train a model and write its predicted labels (not probabilities) for every test feature row to "
            f"./{out} in your working directory, as CSV with the header "
            "patient_id,prediction_time,prediction. Predictions use the same values as the label files. "
            "You are scored by accuracy over all test labels; a missing prediction counts as wrong."
        )
        task_id = str(record["task_id"]) if record.get("task_id") is not None else str(index)
        return TaskInstance(self.name, split, index, task_id, goal, {"task_name": name}, record)

    def instruction(self) -> str:
        return (
            "You solve machine-learning tasks on electronic health record data. Write Python that loads the "
            "given features and labels, trains a model, and writes the requested prediction file. A constant "
            "or random prediction does not count as a solution: the accuracy must beat always predicting the "
            "most common label. Read the data files only from the paths given; do not modify them. Print "
            "whatever you want to see, and set `answer` to the path of the prediction file you wrote."
        )

    @staticmethod
    def prediction_file_for(task_name: str) -> str:
        return f"predictions-{task_name}.csv"

    def prediction_file(self, inst: TaskInstance) -> str:
        return self.prediction_file_for(inst.context["task_name"])

    def sandbox_spec(self, inst: TaskInstance) -> SandboxSpec:
        d = self.data_dir
        public = [d / f for f in self.public_files]
        public += sorted(d.glob("*/train_labels.csv")) + sorted(d.glob("*/val_labels.csv"))
        hidden = [d / f for f in set(self.split_files.values())] + sorted(d.glob("*/test_labels.csv"))
        return SandboxSpec(readonly_paths=public, hidden_paths=hidden)

    def gold_units(self, inst: TaskInstance) -> dict[Key, str]:
        rows = read_csv(self.data_dir / inst.context["task_name"] / "test_labels.csv")
        return collect(rows, lambda r: (normalize_id(r["patient_id"]), normalize_time(r["prediction_time"])), "value")

    def predicted_units(self, inst: TaskInstance, rows: list[dict[str, str]], gold: dict[Key, str]) -> dict[Key, str]:
        rel = self.prediction_file(inst)
        pid, value = pick_column(rows, ("patient_id",)), pick_column(rows, ("prediction",))
        require_columns(rows, rel, patient_id=pid, prediction=value)
        time = pick_column(rows, ("prediction_time", "labeling_time"))
        if time is not None:
            return collect(rows, lambda r: (normalize_id(r.get(pid, "")), normalize_time(r.get(time, ""))), value)
        # Without a time column a prediction is per patient and applies to each of the patient's test labels.
        per_patient = collect(rows, lambda r: (normalize_id(r.get(pid, "")),), value)
        return {k: per_patient[k[:1]] for k in gold if k[:1] in per_patient}

    def oracle_code(self, inst: TaskInstance) -> str:
        name = inst.context["task_name"]
        return f"""import pickle
import numpy as np
import pandas as pd
{NEAREST_NEIGHBOUR_SRC}
D, T = {str(self.data_dir)!r}, {name!r}

def features(split):
    with open(f"{{D}}/clmbr_{{split}}.pkl", "rb") as fh:
        d = pickle.load(fh)
    keys = [(int(p), pd.Timestamp(t)) for p, t in zip(d["patient_ids"], d["labeling_time"])]
    return dict(zip(keys, np.asarray(d["data_matrix"], dtype=float)))

X, y = [], []
for split in ("train", "val"):
    feats = features(split)
    labels = pd.read_csv(f"{{D}}/{{T}}/{{split}}_labels.csv")
    for p, t, v in zip(labels.patient_id, labels.prediction_time, labels.value):
        X.append(feats[(int(p), pd.Timestamp(t))])
        y.append(v)
test = features("test")
keys = list(test)
pred = fit_predict(X, y, [test[k] for k in keys])
out = {self.prediction_file_for(name)!r}
pd.DataFrame({{"patient_id": [k[0] for k in keys], "prediction_time": [k[1] for k in keys],
              "prediction": pred}}).to_csv(out, index=False)
answer = out
"""

    # ---- sample ------------------------------------------------------------------------------------
    @classmethod
    def make_sample(cls, out_dir: Path) -> None:
        rng = np.random.default_rng(1234)
        n_groups, dim = 6, 16
        centres = rng.normal(0.0, 4.0, size=(n_groups, dim))
        specs = [
            ("guo_los", "boolean", [False, True], "Will this hospital stay last at least seven days?"),
            ("guo_readmission", "boolean", [False, True], "Will the patient be readmitted within 30 days?"),
            ("lab_hyperkalemia", "categorical", [0, 1, 2, 3], "Grade the next potassium result: 0 normal .. 3 severe."),
            ("new_hypertension", "boolean", [False, True], "Will hypertension be diagnosed within a year?"),
            ("lab_anemia", "categorical", [0, 1, 2, 3], "Grade the next haemoglobin result: 0 normal .. 3 severe."),
            ("chexpert", "categorical", [8192, 24, 1040, 2], "Which chest X-ray findings (as a 14-bit integer)?"),
        ]
        base = dt.datetime(2020, 1, 1, 23, 59)
        visits: dict[str, list[tuple[int, dt.datetime, int]]] = {}
        pid = 1000
        for split, n_patients in zip(SPLITS, (36, 12, 18)):
            rows = []
            groups = balanced_groups(rng, n_patients + n_patients // 3, n_groups)
            for i, g in enumerate(groups):
                # A third of the patients have a second visit, so labels must be joined on patient and time.
                patient = pid + (i if i < n_patients else i - n_patients)
                when = base + dt.timedelta(days=int(rng.integers(0, 900)) + (0 if i < n_patients else 1000))
                rows.append((patient, when, int(g)))
            pid += n_patients
            visits[split] = rows
            feats = group_features(rng, np.array([g for _, _, g in rows]), centres, 0.3)
            with open(out_dir / f"clmbr_{split}.pkl", "wb") as fh:
                pickle.dump(
                    {
                        "data_matrix": feats.astype(np.float32),
                        "patient_ids": np.array([p for p, _, _ in rows], dtype=np.int64),
                        "labeling_time": [t for _, t, _ in rows],
                    },
                    fh,
                )
        for name, kind, values, _ in specs:
            mapping = label_map(rng, n_groups, values)
            (out_dir / name).mkdir()
            for split, rows in visits.items():
                lines = ["patient_id,value,label_type,prediction_time"]
                lines += [f"{p},{mapping[g]},{kind},{t:%Y-%m-%d %H:%M:%S}" for p, t, g in rows]
                (out_dir / name / f"{split}_labels.csv").write_text("\n".join(lines) + "\n")
        write_jsonl(
            out_dir / "task.jsonl",
            [
                {"task_id": i, "task_name": name, "task_description": f"Synthetic sample task. {text}"}
                for i, (name, _, _, text) in enumerate(specs)
            ],
        )
