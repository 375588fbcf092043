"""Synthetic EHR tables for the sample data of the EHR SQL tasks.

Every value is drawn from a seeded generator over small invented vocabularies; nothing comes from a
credentialed database. The schemas (table and column names) are the real ones, so the benchmark's
query shapes run unchanged. Gold answers are computed by running each sample question's SQL here.
"""

from __future__ import annotations

import csv
import hashlib
import json
import random
import sqlite3
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from medagentgym.tasks.ehrsql import NOW_FILE, csv_name, substitute_now

# The sample's explicit "now" (the EHRSQL convention for these de-identified, shifted dates).
SAMPLE_NOW = "2105-12-31 23:59:00"
_START = datetime(2103, 1, 1)
_FMT = "%Y-%m-%d %H:%M:%S"

Rows = dict[str, list[tuple]]


@dataclass(frozen=True)
class SampleQuestion:
    """A question template, its SQL, and a query picking the entities that fill both ({0}, {1}, ...)."""

    question: str
    query: str
    pick: str = "select 1"


def ts(moment: datetime) -> str:
    return moment.strftime(_FMT)


def rand_time(rng: random.Random, start: datetime = _START, days: float = 1090) -> datetime:
    return start + timedelta(minutes=rng.randrange(int(days * 24 * 60)))


def write_database(out_dir: Path, db_file: str, schema: dict[str, list[tuple[str, str]]], rows: Rows,
                   csv_style: str | None) -> Path:
    """The SQLite file and (unless csv_style is None) one CSV per table with upper-case headers."""
    out_dir.mkdir(parents=True, exist_ok=True)
    db = out_dir / db_file
    con = sqlite3.connect(db)
    with con:
        for table, cols in schema.items():
            con.execute(f"create table {table} ({', '.join(f'{c} {t}' for c, t in cols)})")
            con.executemany(f"insert into {table} values ({', '.join('?' * len(cols))})", rows.get(table, []))
    con.close()
    if csv_style is not None:
        for table, cols in schema.items():
            with open(out_dir / csv_name(table, csv_style), "w", newline="", encoding="utf-8") as fh:
                writer = csv.writer(fh)
                writer.writerow([c.upper() for c, _ in cols])
                writer.writerows(rows.get(table, []))
    (out_dir / NOW_FILE).write_text(SAMPLE_NOW + "\n")
    return db


def cells(rows: list[tuple]) -> list[str]:
    """Result rows as the benchmark stores gold: every cell as a string, NULL as "None"."""
    return [str(v) for row in rows for v in row]


def answer_questions(db: Path, questions: list[SampleQuestion]) -> list[tuple[str, str, list[str]]]:
    """(question, query, gold) per template, entities picked from the data; gold must be non-empty."""
    con = sqlite3.connect(db)
    out = []
    for q in questions:
        picked = con.execute(q.pick).fetchone()
        if picked is None:
            raise RuntimeError(f"sample data has no entity for {q.question!r}")
        question, query = q.question.format(*picked), q.query.format(*picked)
        gold = cells(con.execute(substitute_now(query, SAMPLE_NOW)).fetchall())
        if not gold or gold == ["None"]:
            raise RuntimeError(f"sample question {question!r} has an empty gold answer")
        out.append((question, query, gold))
    con.close()
    return out


def row_id(*parts: Any) -> str:
    return hashlib.sha256("|".join(map(str, parts)).encode()).hexdigest()[:24]


def write_jsonl(path: Path, records: list[dict[str, Any]]) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        fh.writelines(json.dumps(rec) + "\n" for rec in records)


# ---- MIMIC-III (also the database of EHR-SeqSQL and EHRCon) ------------------------------------------
DIAGNOSES = [("4019", "hypertension nos", "unspecified essential hypertension"),
             ("42731", "atrial fibrillation", "atrial fibrillation"),
             ("5849", "acute kidney failure nos", "acute kidney failure, unspecified"),
             ("25000", "dmii wo cmp nt st uncntr", "diabetes mellitus without complication"),
             ("4280", "chf nos", "congestive heart failure, unspecified"),
             ("486", "pneumonia, organism nos", "pneumonia, organism unspecified")]
PROCEDURES = [("3893", "venous cath nec", "venous catheterization, not elsewhere classified"),
              ("9604", "insert endotracheal tube", "insertion of endotracheal tube"),
              ("3995", "hemodialysis", "hemodialysis"),
              ("8856", "coronar arteriogr-2 cath", "coronary arteriography using two catheters")]
LABS = [(50931, "glucose", "mg/dl", 70, 200), (50971, "potassium", "meq/l", 3, 6),
        (50983, "sodium", "meq/l", 130, 150), (50912, "creatinine", "mg/dl", 0.5, 4)]
CHART_ITEMS = [(211, "heart rate", "chartevents", "bpm", 50, 130),
               (618, "respiratory rate", "chartevents", "insp/min", 10, 30),
               (30013, "d5w", "inputevents_cv", "ml", 20, 250),
               (40055, "urine out foley", "outputevents", "ml", 50, 600)]
DRUGS = ["metoprolol", "heparin", "furosemide", "insulin", "acetaminophen", "vancomycin"]
ROUTES = ["po", "iv", "sc", "ng"]
CAREUNITS = ["micu", "sicu", "ccu", "tsicu"]
ORGANISMS = ["staph aureus coag +", "escherichia coli", "klebsiella pneumoniae"]
SPECIMENS = ["blood culture", "urine", "sputum"]
LOCATIONS = ["emergency room admit", "phys referral/normal deli", "transfer from hosp/extram"]


def mimic_rows(seed: int = 3) -> Rows:
    rng = random.Random(seed)
    rows: Rows = {k: [] for k in (
        "patients", "admissions", "d_icd_diagnoses", "d_icd_procedures", "d_labitems", "d_items",
        "diagnoses_icd", "procedures_icd", "labevents", "prescriptions", "cost", "chartevents",
        "inputevents_cv", "outputevents", "microbiologyevents", "icustays", "transfers")}
    rows["d_icd_diagnoses"] = [(i + 1, *d) for i, d in enumerate(DIAGNOSES)]
    rows["d_icd_procedures"] = [(i + 1, *p) for i, p in enumerate(PROCEDURES)]
    rows["d_labitems"] = [(i + 1, item, label) for i, (item, label, *_) in enumerate(LABS)]
    rows["d_items"] = [(i + 1, item, label, links) for i, (item, label, links, *_) in enumerate(CHART_ITEMS)]
    counters = {k: 0 for k in rows}

    def add(table: str, *values: Any) -> int:
        counters[table] += 1
        rows[table].append((counters[table], *values))
        return counters[table]

    hadm, icu = 100000, 200000
    for s in range(10):
        subject = 10001 + s
        dob = datetime(2030 + rng.randrange(50), 1 + rng.randrange(12), 1 + rng.randrange(28))
        add("patients", subject, rng.choice(["m", "f"]), ts(dob), None)
        for a in range(1 + s % 2):
            hadm += 1
            # The last two patients' latest stays are still open at the sample's "now".
            still_open = s >= 8 and a == s % 2
            admit = rand_time(rng, datetime(2105, 11, 1), 50) if still_open else rand_time(rng)
            disch = None if still_open else ts(admit + timedelta(days=2 + rng.randrange(9)))
            add("admissions", subject, hadm, ts(admit), disch, rng.choice(["emergency", "elective", "urgent"]),
                rng.choice(LOCATIONS), None if still_open else rng.choice(["home", "snf", "rehab/distinct part hosp"]),
                rng.choice(["medicare", "private", "medicaid"]), rng.choice(["engl", "span"]),
                rng.choice(["married", "single", "widowed"]), rng.choice(["white", "black/african american", "asian"]),
                admit.year - dob.year)

            def during(hours: int = 72, start: datetime = admit) -> str:
                return ts(start + timedelta(minutes=rng.randrange(hours * 60)))

            for code, *_ in rng.sample(DIAGNOSES, 2):
                rid = add("diagnoses_icd", subject, hadm, code, during())
                add("cost", subject, hadm, "diagnoses_icd", rid, during(), round(rng.uniform(50, 900), 2))
            if rng.random() < 0.6:
                rid = add("procedures_icd", subject, hadm, rng.choice(PROCEDURES)[0], during())
                add("cost", subject, hadm, "procedures_icd", rid, during(), round(rng.uniform(200, 3000), 2))
            for item, _, uom, lo, hi in rng.sample(LABS, 3):
                add("labevents", subject, hadm, item, during(), round(rng.uniform(lo, hi), 1), uom)
            for drug in rng.sample(DRUGS, 3):
                start = during()
                add("prescriptions", subject, hadm, start, start, drug, str(rng.choice([1, 5, 25, 40])),
                    "mg", rng.choice(ROUTES))
            if rng.random() < 0.5:
                add("microbiologyevents", subject, hadm, during(), rng.choice(SPECIMENS), rng.choice(ORGANISMS))
            if a == 0 or still_open:
                icu += 1
                unit = rng.choice(CAREUNITS)
                intime = admit + timedelta(hours=2)
                add("icustays", subject, hadm, icu, unit, unit, 10 + rng.randrange(50), 10 + rng.randrange(50),
                    ts(intime), None if still_open else ts(intime + timedelta(days=1)))
                add("transfers", subject, hadm, icu, "admit", unit, 10 + rng.randrange(50), ts(intime), None)
                for item, _, table, uom, lo, hi in CHART_ITEMS:
                    value = round(rng.uniform(lo, hi), 1)
                    if table == "chartevents":
                        add(table, subject, hadm, icu, item, during(), value, uom)
                    else:
                        add(table, subject, hadm, icu, during(), item, value)
    return rows


# ---- eICU ---------------------------------------------------------------------------------------------
EICU_DIAGNOSES = [("acute respiratory failure", "518.81"), ("sepsis", "038.9"),
                  ("hypotension", "458.9"), ("acute renal failure", "584.9")]
EICU_TREATMENTS = ["mechanical ventilation", "vasopressors - norepinephrine", "antibacterials", "oxygen therapy"]
EICU_LABS = [("potassium", 3, 6), ("glucose", 70, 220), ("hgb", 7, 15), ("anion gap", 5, 20)]
EICU_DRUGS = ["aspirin 81 mg po chew", "propofol 1% inj", "labetalol", "pantoprazole 40 mg iv"]
EICU_ROUTES = ["po", "iv", "ivpb", "oral"]


def eicu_rows(seed: int = 5) -> Rows:
    rng = random.Random(seed)
    rows: Rows = {k: [] for k in (
        "patient", "diagnosis", "treatment", "lab", "medication", "cost", "allergy", "intakeoutput",
        "microlab", "vitalperiodic")}
    counters = {k: 0 for k in rows}

    def add(table: str, *values: Any) -> int:
        counters[table] += 1
        rows[table].append((counters[table], *values))
        return counters[table]

    unit_id = 140000
    for p in range(8):
        pid, system = f"0{p % 3}2-{1000 + 37 * p}", 130000 + p
        gender = rng.choice(["male", "female"])
        for stay in range(1 + p % 2):
            unit_id += 1
            still_open = p >= 6 and stay == p % 2
            admit = rand_time(rng, datetime(2105, 11, 1), 50) if still_open else rand_time(rng)
            disch = None if still_open else ts(admit + timedelta(days=3 + rng.randrange(6)))
            rows["patient"].append((
                pid, system, unit_id, gender, str(40 + rng.randrange(50)),
                rng.choice(["caucasian", "african american", "hispanic"]), 70 + p % 3, 80 + p % 4,
                round(rng.uniform(150, 190), 1), round(rng.uniform(50, 110), 1), round(rng.uniform(50, 110), 1),
                ts(admit), rng.choice(["emergency department", "direct admit"]), ts(admit + timedelta(hours=1)),
                None if still_open else ts(admit + timedelta(days=2)), disch,
                None if still_open else rng.choice(["alive", "expired"])))

            def during(hours: int = 48, start: datetime = admit) -> str:
                return ts(start + timedelta(minutes=rng.randrange(hours * 60)))

            for name, code in rng.sample(EICU_DIAGNOSES, 2):
                rid = add("diagnosis", unit_id, name, during(), code)
                add("cost", pid, system, "diagnosis", rid, during(), round(rng.uniform(10, 500), 2))
            for name in rng.sample(EICU_TREATMENTS, 2):
                rid = add("treatment", unit_id, name, during())
                add("cost", pid, system, "treatment", rid, during(), round(rng.uniform(10, 500), 2))
            for name, lo, hi in rng.sample(EICU_LABS, 3):
                add("lab", unit_id, name, round(rng.uniform(lo, hi), 1), during())
            for drug in rng.sample(EICU_DRUGS, 2):
                start = admit + timedelta(hours=rng.randrange(24))
                add("medication", unit_id, drug, rng.choice(["1 tab", "40 mg", "100 ml"]), rng.choice(EICU_ROUTES),
                    ts(start), ts(start + timedelta(hours=12)))
            if p % 3 == 0:
                add("allergy", unit_id, rng.choice(["penicillin", "sulfa"]), rng.choice(["rash", "hives"]), during())
            for label, path in (("urine", "flowsheet|output (ml)|urine"), ("ns ivf", "flowsheet|intake (ml)|ivf")):
                add("intakeoutput", unit_id, path, label, round(rng.uniform(50, 900), 0), during())
            if p % 2 == 0:
                add("microlab", unit_id, rng.choice(["blood, venipuncture", "urine, catheter specimen"]),
                    rng.choice(["escherichia coli", "staphylococcus aureus"]), during())
            for _ in range(3):
                add("vitalperiodic", unit_id, round(rng.uniform(36, 39), 1), round(rng.uniform(88, 100), 0),
                    round(rng.uniform(55, 120), 0), round(rng.uniform(10, 30), 0), round(rng.uniform(90, 160), 0),
                    round(rng.uniform(50, 90), 0), round(rng.uniform(60, 110), 0), during())
    return rows


# ---- TREQS (MIMICSQL's five denormalised tables) -----------------------------------------------------
FIRST = ["Alex", "Morgan", "Jamie", "Casey", "Robin", "Taylor", "Jordan", "Riley"]
LAST = ["Ashford", "Brennan", "Calloway", "Dunmore", "Ellery", "Fairbanks"]
TREQS_LABS = [("50912", "Creatinine", "Blood", "Chemistry"), ("51222", "Hemoglobin", "Blood", "Hematology"),
              ("51491", "pH", "Urine", "Hematology")]


def treqs_rows(seed: int = 7) -> Rows:
    rng = random.Random(seed)
    rows: Rows = {k: [] for k in ("demographic", "diagnoses", "procedures", "prescriptions", "lab")}
    for i in range(12):
        subject, hadm = 2000 + 17 * i, 150000 + i
        dob_year = 2040 + rng.randrange(60)
        admit = rand_time(rng, datetime(2120, 1, 1), 3000)
        stay = 1 + rng.randrange(20)
        expired = rng.random() < 0.3
        dod = ts(admit + timedelta(days=stay)) if expired else None
        rows["demographic"].append((
            subject, hadm, f"{rng.choice(FIRST)} {rng.choice(LAST)}", rng.choice(["married", "single", "divorced"]),
            admit.year - dob_year, f"{dob_year}-0{1 + i % 9}-1{i % 10} 00:00:00", rng.choice(["M", "F"]),
            rng.choice(["ENGL", "SPAN"]), rng.choice(["CATHOLIC", "NOT SPECIFIED", "JEWISH"]),
            rng.choice(["EMERGENCY", "ELECTIVE", "URGENT"]), stay, rng.choice(["Medicare", "Private", "Medicaid"]),
            rng.choice(["WHITE", "BLACK/AFRICAN AMERICAN", "WHITE - RUSSIAN"]), int(expired),
            rng.choice(["EMERGENCY ROOM ADMIT", "CLINIC REFERRAL/PREMATURE"]),
            rng.choice(["HOME", "SNF", "DEAD/EXPIRED"]), rng.choice(["SEPSIS", "PNEUMONIA", "CHEST PAIN"]), dod,
            dob_year, admit.year + stay // 365 if expired else None,
            ts(admit), ts(admit + timedelta(days=stay)), admit.year))
        for code, short, long in rng.sample(DIAGNOSES, 2):
            rows["diagnoses"].append((subject, hadm, code, short, long))
        code, short, long = rng.choice(PROCEDURES)
        rows["procedures"].append((subject, hadm, code, short, long))
        for drug in rng.sample(DRUGS, 2):
            rows["prescriptions"].append((subject, hadm, 300000 + i, rng.choice(["MAIN", "BASE"]), drug,
                                          drug[:4].upper() + "10", rng.choice(["PO", "IV"]),
                                          str(rng.choice([5, 10, 20]))))
        for item, label, fluid, category in rng.sample(TREQS_LABS, 2):
            flag = rng.choice(["abnormal", "delta", None])
            rows["lab"].append((subject, hadm, item, ts(admit + timedelta(hours=3)), flag,
                                str(round(rng.uniform(0.5, 14), 1)), label, fluid, category))
    return rows
