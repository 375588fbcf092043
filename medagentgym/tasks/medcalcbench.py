"""MedCalc-Bench: compute a clinical calculator's value from a patient note.

Task file: ``test_tasks.jsonl`` (one row per note/question, gold in "Ground Truth Answer" with "Lower Limit"
and "Upper Limit"), plus ``calculation_method.jsonl`` (per-calculator summaries, used as an optional hint).
The public release has no training file; run.split=train reads ``train_tasks_all.jsonl``, the name the
original harness used.
"""

from __future__ import annotations

import datetime as dt
import json
import random
from pathlib import Path
from typing import Any

from medagentgym.grading.answers import (
    NO_ANSWER,
    parse_literal,
    submitted_answer,
    to_number,
)
from medagentgym.grading.dates import format_us_date, parse_date, parse_weeks_days
from medagentgym.grading.numeric import within_interval
from medagentgym.sandbox.base import Sandbox
from medagentgym.tasks.base import Task
from medagentgym.types import ExecResult, TaskInstance, Verdict

METHODS_FILE = "calculation_method.jsonl"
_FIELDS = ("Calculator Name", "Patient Note", "Question", "Ground Truth Answer", "Lower Limit", "Upper Limit")


def gold_kind(gold: str) -> str:
    """How a gold answer is compared: "date", "weeks_days" or "number" ("unusable" when it is none)."""
    if parse_date(gold) is not None:
        return "date"
    if parse_weeks_days(parse_literal(gold)) is not None:
        return "weeks_days"
    if to_number(gold) is not None:
        return "number"
    return "unusable"


def check_answer(value: Any, gold: str, lower: str, upper: str) -> tuple[bool, str]:
    """Grade one submitted value against a row's gold; (correct, reason). Pure, for golden tests."""
    if value is NO_ANSWER:
        return False, "no answer: the code failed or set no `answer` and printed nothing"
    kind = gold_kind(gold)
    if kind == "date":
        got = parse_date(value)
        if got is None:
            return False, f"expected a date as MM/DD/YYYY, got {value!r}"
        ok = got == parse_date(gold)
        return ok, "date matches" if ok else "wrong date"
    if kind == "weeks_days":
        got = parse_weeks_days(value)
        if got is None:
            return False, f"expected (weeks, days), got {value!r}"
        ok = got == parse_weeks_days(parse_literal(gold))
        return ok, "gestational age matches" if ok else "wrong gestational age"
    if to_number(value) is None:
        return False, f"expected a single number, got {value!r}"
    ok = within_interval(value, lower, upper)
    return ok, "within the accepted range" if ok else "outside the accepted range"


class MedCalcBench(Task):
    name = "medcalcbench"
    record_fields = _FIELDS
    split_files = {"test": "test_tasks.jsonl", "train": "train_tasks_all.jsonl"}

    def __init__(self, cfg, data_dir: Path):
        super().__init__(cfg, data_dir)
        self._methods: dict[str, str] | None = None

    def _method_hints(self) -> dict[str, str]:
        """Calculator name -> short summary; empty when the optional file is absent or hints are off."""
        if self._methods is None:
            self._methods = {}
            path = self.data_dir / METHODS_FILE
            if self.options.get("method_hint", True) and path.exists():
                for line in path.read_text(encoding="utf-8").splitlines():
                    if line.strip():
                        row = json.loads(line)
                        self._methods.setdefault(row["Calculator"], row.get("Short Summary", ""))
        return self._methods

    def make_instance(self, split: str, index: int, record: dict[str, Any]) -> TaskInstance:
        calculator = record["Calculator Name"]
        hint = self._method_hints().get(calculator, "")
        goal = (
            f"Patient note:\n{record['Patient Note'].strip()}\n\n"
            f"Question: {record['Question'].strip()}\n"
            + (f"\nHow this calculator works: {hint.strip()}\n" if hint else "")
            + "\nWrite Python code that computes the value from the note and stores it in the variable `answer`."
        )
        task_id = str(record.get("Row Number", index))
        return TaskInstance(self.name, split, index, task_id, goal, {"calculator": calculator}, record)

    def instruction(self) -> str:
        return (
            "You are a clinician's assistant. Read the patient note, pick out the values the calculator needs, "
            "and compute the requested score or quantity with Python. Store the final result in a variable "
            "named `answer`: a plain number for scores and measurements (no units), a string 'MM/DD/YYYY' for "
            "dates, and a tuple (weeks, days) of integers for a gestational age. Only `answer` is graded; "
            "numeric answers pass within the calculator's tolerance (about 5% for continuous values, exact "
            "for point scores)."
        )

    def grade(self, inst: TaskInstance, result: ExecResult, code: str, sandbox: Sandbox) -> Verdict:
        rec = inst.record
        gold = str(rec["Ground Truth Answer"]).strip()
        kind = gold_kind(gold)
        if kind == "unusable" or (
            kind == "number" and not within_interval(gold, rec["Lower Limit"], rec["Upper Limit"])
        ):
            return Verdict(False, reason=f"gold answer {gold!r} is not usable", status="invalid_task")
        ok, reason = check_answer(submitted_answer(result), gold, str(rec["Lower Limit"]), str(rec["Upper Limit"]))
        return Verdict(ok, 1.0 if ok else 0.0, reason)

    def oracle_code(self, inst: TaskInstance) -> str:
        gold = str(inst.record["Ground Truth Answer"]).strip()
        kind = gold_kind(gold)
        if kind == "number":
            value: Any = to_number(gold)
        elif kind == "weeks_days":
            value = divmod(parse_weeks_days(parse_literal(gold)), 7)
        else:
            value = gold
        return f"answer = {value!r}\nprint(answer)\n"

    @classmethod
    def make_sample(cls, out_dir: Path) -> None:
        out_dir = Path(out_dir)
        rows = [_sample_row(i, plan) for i, plan in enumerate(_SAMPLE_PLAN)]
        with open(out_dir / cls.split_files["test"], "w", encoding="utf-8") as fh:
            fh.writelines(json.dumps(r) + "\n" for r in rows)
        with open(out_dir / METHODS_FILE, "w", encoding="utf-8") as fh:
            fh.writelines(
                json.dumps({"Calculator": name, "Short Summary": summary, "Long Summary": summary}) + "\n"
                for name, summary in _METHODS.items()
            )


# ---- synthetic sample ------------------------------------------------------------------------------
# Notes are generated from templates; gold is computed from the generated values with the formulas
# stated in _METHODS. Limits follow the real file: +-5% of gold for continuous values, exact for scores
# and dates.

_METHODS = {
    "Body Mass Index (BMI)": "BMI = weight (kg) / height (m)^2.",
    "Mean Arterial Pressure (MAP)": "MAP = (2 x diastolic + systolic) / 3, in mm Hg.",
    "Creatinine Clearance (Cockcroft-Gault Equation)": (
        "CrCl = (140 - age) x weight (kg) x (0.85 if female else 1) / (72 x serum creatinine in mg/dL)."
    ),
    "CHA2DS2-VASc Score for Atrial Fibrillation Stroke Risk": (
        "One point each for congestive heart failure, hypertension, diabetes, vascular disease, age 65-74 and "
        "female sex; two points each for age 75 or older and prior stroke/TIA/thromboembolism."
    ),
    "Estimated Due Date": "Due date = last menstrual period + 280 days + (cycle length - 28) days.",
    "Estimated of Conception": "Conception date = last menstrual period + 14 days.",
    "Estimated Gestational Age": "Gestational age = today - last menstrual period, as whole weeks and days.",
}
_CALC_IDS = dict(zip(_METHODS, (6, 5, 2, 4, 13, 68, 69), strict=True))
_SEXES = (("man", "Male", "He"), ("woman", "Female", "She"))


def _continuous(value: float) -> tuple[str, str, str]:
    gold = round(value, 3)
    return f"{gold}", f"{round(gold * 0.95, 6)}", f"{round(gold * 1.05, 6)}"


def _bmi(rng: random.Random) -> tuple:
    age, (noun, _, pron) = rng.randint(20, 80), rng.choice(_SEXES)
    h, w = rng.randint(150, 195), round(rng.uniform(45, 120), 1)
    note = f"A {noun} aged {age} attends a routine visit. {pron} is {h} cm tall and weighs {w} kg."
    return (
        note,
        "What is the patient's body mass index (BMI) in kg/m^2?",
        {"weight": [w, "kg"], "height": [h, "cm"]},
        _continuous(w / (h / 100) ** 2),
    )


def _map(rng: random.Random) -> tuple:
    age, (noun, _, pron) = rng.randint(20, 80), rng.choice(_SEXES)
    sbp, dbp = rng.randint(95, 180), rng.randint(50, 100)
    note = (
        f"A {noun} aged {age} presents with headache. {pron} has a blood pressure of {sbp}/{dbp} mmHg and a "
        f"pulse of {rng.randint(55, 110)}/min."
    )
    ent = {"Systolic Blood Pressure": [sbp, "mm hg"], "Diastolic Blood Pressure": [dbp, "mm hg"]}
    return note, "What is the patient's mean arterial pressure in mm Hg?", ent, _continuous((2 * dbp + sbp) / 3)


def _crcl(rng: random.Random) -> tuple:
    age, (noun, sex, _) = rng.randint(30, 85), rng.choice(_SEXES)
    w, cr = round(rng.uniform(50, 95), 1), round(rng.uniform(0.6, 2.5), 1)
    note = f"A {noun} aged {age}, weighing {w} kg, is admitted for pneumonia. Serum creatinine is {cr} mg/dL."
    q = "What is the patient's creatinine clearance in mL/min by Cockcroft-Gault, using the actual body weight?"
    value = (140 - age) * w * (0.85 if sex == "Female" else 1.0) / (72 * cr)
    return (
        note,
        q,
        {"sex": sex, "age": [age, "years"], "weight": [w, "kg"], "creatinine": [cr, "mg/dL"]},
        _continuous(value),
    )


def _chads(rng: random.Random) -> tuple:
    age, (noun, sex, pron) = rng.randint(50, 90), rng.choice(_SEXES)
    history = {
        k: rng.random() < 0.4
        for k in (
            "congestive heart failure",
            "hypertension",
            "diabetes",
            "a prior stroke",
            "peripheral vascular disease",
        )
    }
    had = [k for k, v in history.items() if v] or ["no chronic illness"]
    note = (
        f"A {noun} aged {age} with atrial fibrillation attends clinic. {pron} has a history of {', '.join(had)}."
    )
    score = (2 if age >= 75 else 1 if age >= 65 else 0) + (sex == "Female") + 2 * history["a prior stroke"]
    score += sum(
        history[k] for k in ("congestive heart failure", "hypertension", "diabetes", "peripheral vascular disease")
    )
    ent = {"sex": sex, "age": [age, "years"], **{k: v for k, v in history.items()}}
    return note, "What is the patient's CHA2DS2-VASc score?", ent, (str(score),) * 3


def _lmp(rng: random.Random) -> dt.date:
    return dt.date(2010, 1, 1) + dt.timedelta(days=rng.randint(0, 4000))


def _due_date(rng: random.Random) -> tuple:
    lmp, cycle = _lmp(rng), rng.randint(21, 35)
    note = f"The patient's last menstrual period was on {format_us_date(lmp)}. Her cycle length is {cycle} days."
    q = "Using Naegele's rule adjusted for cycle length, what is the patient's estimated due date (MM/DD/YYYY)?"
    gold = format_us_date(lmp + dt.timedelta(days=280 + cycle - 28))
    return note, q, {"cycle length": cycle, "Last menstrual date": format_us_date(lmp)}, (gold,) * 3


def _conception(rng: random.Random) -> tuple:
    lmp, cycle = _lmp(rng), rng.randint(21, 35)
    note = f"The patient's last menstrual period was on {format_us_date(lmp)}. Her cycle length is {cycle} days."
    q = "What is the patient's estimated date of conception (MM/DD/YYYY)?"
    gold = format_us_date(lmp + dt.timedelta(days=14))
    return note, q, {"cycle length": cycle, "Last menstrual date": format_us_date(lmp)}, (gold,) * 3


def _gestational_age(rng: random.Random) -> tuple:
    lmp = _lmp(rng)
    today = lmp + dt.timedelta(days=rng.randint(3, 280))
    note = f"The patient's last menstrual period was on {format_us_date(lmp)}. Today is {format_us_date(today)}."
    q = "What is the patient's estimated gestational age, as a tuple (weeks, days)?"
    weeks, days = divmod((today - lmp).days, 7)
    gold = str((f"{weeks} weeks", f"{days} days"))
    return (
        note,
        q,
        {"Current Date": format_us_date(today), "Last menstrual date": format_us_date(lmp)},
        (gold,) * 3,
    )


_SAMPLE_PLAN = [
    ("Body Mass Index (BMI)", _bmi),
    ("Body Mass Index (BMI)", _bmi),
    ("Mean Arterial Pressure (MAP)", _map),
    ("Mean Arterial Pressure (MAP)", _map),
    ("Creatinine Clearance (Cockcroft-Gault Equation)", _crcl),
    ("CHA2DS2-VASc Score for Atrial Fibrillation Stroke Risk", _chads),
    ("CHA2DS2-VASc Score for Atrial Fibrillation Stroke Risk", _chads),
    ("Estimated Due Date", _due_date),
    ("Estimated of Conception", _conception),
    ("Estimated Gestational Age", _gestational_age),
]


def _sample_row(index: int, plan: tuple) -> dict[str, Any]:
    name, maker = plan
    note, question, entities, (gold, lower, upper) = maker(random.Random(f"medcalcbench-{index}"))
    return {
        "Row Number": index + 1,
        "Calculator ID": _CALC_IDS[name],
        "Calculator Name": name,
        "Patient Note": note,
        "Question": question,
        "Relevant Entities": str(entities),
        "Ground Truth Answer": gold,
        "Lower Limit": lower,
        "Upper Limit": upper,
    }
