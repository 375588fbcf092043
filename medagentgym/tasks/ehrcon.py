"""EHRCon: does a clinical note contradict the structured MIMIC-III database about one medical entity?

Each row names a hospital admission and a medical entity; the gold ``Has error`` is a boolean. The agent
has the database (``EHRCon_combined.db``) and the notes (``clinical_notes.csv``). The grader is strict:
the submitted ``answer`` must be the boolean True or False equal to the gold (the original accepted any
output containing the word "true").
"""

from __future__ import annotations

import csv
import random
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from medagentgym.errors import TaskFileError
from medagentgym.grading.answers import NO_ANSWER, submitted_answer
from medagentgym.sandbox.base import Sandbox
from medagentgym.tasks import ehr_sample as es
from medagentgym.tasks.ehrsql import EHRSQLTask
from medagentgym.tasks.mimic_iii import MIMIC_OVERVIEW, MIMIC_SCHEMA
from medagentgym.types import ExecResult, TaskInstance, Verdict

NOTES_FILE = "clinical_notes.csv"
NOTE_COLUMNS = ["ROW_ID", "SUBJECT_ID", "HADM_ID", "CHARTDATE", "CHARTTIME", "STORETIME", "CATEGORY",
                "DESCRIPTION", "CGID", "ISERROR", "TEXT", "ADMITTIME"]


def admission_id(value: Any) -> str:
    """The release writes ids as floats ("127294.0"); the agent is shown the integer hadm_id."""
    text = str(value).strip()
    return text[:-2] if text.endswith(".0") and text[:-2].isdigit() else text


class EhrCon(EHRSQLTask):
    name = "ehrcon"
    dataset = "MIMIC-III (EHRCon)"
    db_file = "EHRCon_combined.db"
    schema = MIMIC_SCHEMA
    overview = MIMIC_OVERVIEW
    csv_style = None  # the original points agents at the database and the notes CSV only
    extra_public_files = (NOTES_FILE,)
    gold_field = "Has error"
    source = "MIMIC-III and its clinical notes (EHRCon)"
    relative_time = False

    def question(self, record: dict[str, Any]) -> str:
        hadm, entity = record.get("Hospital admission"), record.get("Medical entity")
        if hadm is None or not str(entity or "").strip():
            raise TaskFileError(
                "An ehrcon task row lacks 'Hospital admission' or 'Medical entity'; the task file must be the "
                "original release's format (see docs/tasks/ehrcon.md)."
            )
        return (
            f"For hospital admission (hadm_id) {admission_id(hadm)} and the medical entity {str(entity).strip()!r}, "
            "is there any inconsistency between the clinical notes and the database tables?"
        )

    def where_data_is(self) -> str:
        return (
            f"The SQLite database is {self.db_path}; the clinical notes are in {self.data_dir / NOTES_FILE} "
            f"(columns {', '.join(NOTE_COLUMNS)})."
        )

    def answer_format(self) -> str:
        return "Set `answer = True` if the notes and the database disagree about this entity, else `answer = False`."

    def gold(self, inst: TaskInstance) -> bool | None:
        gold = inst.record.get(self.gold_field)
        return gold if isinstance(gold, bool) else None

    def grade(self, inst: TaskInstance, result: ExecResult, code: str, sandbox: Sandbox) -> Verdict:
        gold = self.gold(inst)
        if gold is None:
            return Verdict(False, reason="the task row's 'Has error' is not a boolean", status="invalid_task")
        sub = submitted_answer(result)
        if sub is NO_ANSWER:
            return Verdict(False, reason="no answer was submitted")
        if not isinstance(sub, bool):
            return Verdict(False, reason=f"answer must be True or False, got {type(sub).__name__}")
        correct = sub is gold
        return Verdict(correct, float(correct), "matches the gold label" if correct else "wrong label")

    def oracle_code(self, inst: TaskInstance) -> str:
        return f"answer = {self.gold(inst)!r}\n"

    @classmethod
    def make_sample(cls, out_dir: Path) -> None:
        rows = es.mimic_rows()
        es.write_database(out_dir, cls.db_file, cls.schema, rows, cls.csv_style)
        labels = {item: label for _, item, label in rows["d_labitems"]}
        admits = {r[2]: r for r in rows["admissions"]}
        rng = random.Random(11)
        # One note per admission restating some lab values; about a third are deliberately misstated,
        # so the gold comes from comparing the note with the database.
        facts: dict[int, list[tuple[str, float, float]]] = {}
        for _, _, hadm, item, _, value, _ in rows["labevents"]:
            stated = value if rng.random() < 0.65 else round(value * rng.choice([0.5, 1.5]) + 1, 1)
            facts.setdefault(hadm, []).append((labels[item], value, stated))
        notes, records = [], []
        for n, (hadm, entries) in enumerate(sorted(facts.items())[:8]):
            admit = datetime.strptime(admits[hadm][3], "%Y-%m-%d %H:%M:%S")
            when = es.ts(admit + timedelta(days=1))
            text = " ".join(f"Labs notable for {label} of {stated}." for label, _, stated in entries)
            notes.append([n + 1, admits[hadm][1], hadm, when[:10], when, when, "Discharge summary", "Report",
                          17000 + n, "", text, admits[hadm][3]])
            for label, value, stated in entries[:2]:
                wrong = stated != value
                records.append({"Hospital admission": f"{hadm}.0", "Medical entity": label,
                                "Number of inconsistencies": int(wrong), "Has error": wrong, "split": "test"})
        with open(out_dir / NOTES_FILE, "w", newline="", encoding="utf-8") as fh:
            writer = csv.writer(fh)
            writer.writerow(NOTE_COLUMNS)
            writer.writerows(notes)
        es.write_jsonl(out_dir / cls.split_files["test"], records)
        es.write_jsonl(out_dir / cls.split_files["train"], [{**r, "split": "train"} for r in records[:6]])
