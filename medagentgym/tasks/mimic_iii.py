"""MIMIC-III questions (EHRSQL): natural-language questions answered by querying the MIMIC-III database."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from medagentgym.tasks import ehr_sample as es
from medagentgym.tasks.ehrsql import EHRSQLTask, parse_schema

MIMIC_SCHEMA = parse_schema({
    "patients": "row_id i, subject_id i, gender t, dob t, dod t",
    "admissions": "row_id i, subject_id i, hadm_id i, admittime t, dischtime t, admission_type t, "
                  "admission_location t, discharge_location t, insurance t, language t, marital_status t, "
                  "ethnicity t, age i",
    "d_icd_diagnoses": "row_id i, icd9_code t, short_title t, long_title t",
    "d_icd_procedures": "row_id i, icd9_code t, short_title t, long_title t",
    "d_labitems": "row_id i, itemid i, label t",
    "d_items": "row_id i, itemid i, label t, linksto t",
    "diagnoses_icd": "row_id i, subject_id i, hadm_id i, icd9_code t, charttime t",
    "procedures_icd": "row_id i, subject_id i, hadm_id i, icd9_code t, charttime t",
    "labevents": "row_id i, subject_id i, hadm_id i, itemid i, charttime t, valuenum r, valueuom t",
    "prescriptions": "row_id i, subject_id i, hadm_id i, startdate t, enddate t, drug t, dose_val_rx t, "
                     "dose_unit_rx t, route t",
    "cost": "row_id i, subject_id i, hadm_id i, event_type t, event_id i, chargetime t, cost r",
    "chartevents": "row_id i, subject_id i, hadm_id i, icustay_id i, itemid i, charttime t, valuenum r, valueuom t",
    "inputevents_cv": "row_id i, subject_id i, hadm_id i, icustay_id i, charttime t, itemid i, amount r",
    "outputevents": "row_id i, subject_id i, hadm_id i, icustay_id i, charttime t, itemid i, value r",
    "microbiologyevents": "row_id i, subject_id i, hadm_id i, charttime t, spec_type_desc t, org_name t",
    "icustays": "row_id i, subject_id i, hadm_id i, icustay_id i, first_careunit t, last_careunit t, "
                "first_wardid i, last_wardid i, intime t, outtime t",
    "transfers": "row_id i, subject_id i, hadm_id i, icustay_id i, eventtype t, careunit t, wardid i, intime t, "
                 "outtime t",
})

MIMIC_OVERVIEW = (
    "subject_id identifies a patient, hadm_id a hospital admission and icustay_id an ICU stay; tables join on "
    "them. Tables starting with d_ are dictionaries: join on itemid (d_items, d_labitems) or icd9_code "
    "(d_icd_diagnoses, d_icd_procedures) to get names. patients, admissions, icustays and transfers describe "
    "stays; the *events tables, prescriptions, cost, diagnoses_icd and procedures_icd hold care data."
)

_ADMISSIONS_OF = "select admissions.hadm_id from admissions where admissions.subject_id = {0}"
MIMIC_QUESTIONS = [
    es.SampleQuestion(
        "what is the intake method of {0}?",
        "select distinct prescriptions.route from prescriptions where prescriptions.drug = '{0}'",
        "select drug from prescriptions group by drug order by count(distinct route) desc, drug limit 1"),
    es.SampleQuestion(
        "what is the gender of patient {0}?",
        "select distinct patients.gender from patients where patients.subject_id = {0}",
        "select subject_id from patients order by subject_id limit 1 offset 3"),
    es.SampleQuestion(
        "how many days have passed since patient {0} was admitted to the hospital?",
        "select 1 * ( strftime('%j',current_time) - strftime('%j',admissions.admittime) ) from admissions "
        "where admissions.subject_id = {0} and admissions.dischtime is null",
        "select subject_id from admissions where dischtime is null order by subject_id limit 1"),
    es.SampleQuestion(
        "has patient {0} been admitted to the hospital this year?",
        "select count(*)>0 from admissions where admissions.subject_id = {0} and "
        "datetime(admissions.admittime,'start of year') = datetime(current_time,'start of year','-0 year')",
        "select subject_id from admissions where dischtime is null order by subject_id desc limit 1"),
    es.SampleQuestion(
        "how many patients were diagnosed with {0}?",
        "select count( distinct admissions.subject_id ) from admissions where admissions.hadm_id in ( select "
        "diagnoses_icd.hadm_id from diagnoses_icd where diagnoses_icd.icd9_code = ( select "
        "d_icd_diagnoses.icd9_code from d_icd_diagnoses where d_icd_diagnoses.short_title = '{0}' ) )",
        "select short_title from d_icd_diagnoses order by row_id limit 1 offset 1"),
    es.SampleQuestion(
        "what was the maximum {1} value of patient {0}?",
        "select max(labevents.valuenum) from labevents where labevents.hadm_id in ( " + _ADMISSIONS_OF + " ) "
        "and labevents.itemid in ( select d_labitems.itemid from d_labitems where d_labitems.label = '{1}' )",
        "select labevents.subject_id, d_labitems.label from labevents join d_labitems using (itemid) "
        "order by labevents.row_id limit 1 offset 5"),
    es.SampleQuestion(
        "what drugs were prescribed to patient {0} since 12 months ago?",
        "select distinct prescriptions.drug from prescriptions where prescriptions.hadm_id in ( " + _ADMISSIONS_OF
        + " ) and datetime(prescriptions.startdate) >= datetime(current_time,'-12 month')",
        "select subject_id from admissions where dischtime is null order by subject_id limit 1"),
    es.SampleQuestion(
        "what was the first careunit of patient {0}'s first icu stay?",
        "select icustays.first_careunit from icustays where icustays.hadm_id in ( " + _ADMISSIONS_OF + " ) "
        "order by icustays.intime asc limit 1",
        "select subject_id from icustays order by row_id limit 1 offset 2"),
    es.SampleQuestion(
        "what organism was found in patient {0}'s first {1} test?",
        "select microbiologyevents.org_name from microbiologyevents where microbiologyevents.hadm_id in ( "
        + _ADMISSIONS_OF + " ) and microbiologyevents.spec_type_desc = '{1}' order by microbiologyevents.charttime "
        "asc limit 1",
        "select subject_id, spec_type_desc from microbiologyevents order by row_id limit 1"),
    es.SampleQuestion(
        "what is the total cost of patient {0}'s hospital stays?",
        "select sum(cost.cost) from cost where cost.hadm_id in ( " + _ADMISSIONS_OF + " )",
        "select subject_id from cost order by row_id limit 1 offset 4"),
]


def write_ehrsql_sample(task_cls: type[EHRSQLTask], out_dir: Path, rows: dict[str, list],
                        questions: list[tuple[str, str]]) -> None:
    """The sample database plus EHRSQL-format task files whose gold comes from running each question's SQL
    on it: every question in the test file, the first four in the train file."""
    db = es.write_database(out_dir, task_cls.db_file, task_cls.schema, rows, task_cls.csv_style)
    answered = es.answer_questions(db, questions)
    es.write_jsonl(out_dir / task_cls.split_files["test"], ehrsql_records(task_cls.name, "valid", answered))
    es.write_jsonl(out_dir / task_cls.split_files["train"], ehrsql_records(task_cls.name, "train", answered[:4]))


def ehrsql_records(db_id: str, split: str, questions: list[tuple[str, str, list[str]]]) -> list[dict[str, Any]]:
    """Rows in the EHRSQL task-file format (the tag fields carry no meaning in the sample)."""
    return [
        {"db_id": db_id, "question": q, "template": q, "query": sql, "value": {}, "q_tag": q,
         "t_tag": ["", "", "", "", ""], "o_tag": [""] * 9, "tag": q, "department": "['sample']",
         "importance": "medium", "para_type": "machine", "is_impossible": False, "split": split,
         "id": es.row_id(db_id, split, q), "answer": gold}
        for q, sql, gold in questions
    ]


class MimicIII(EHRSQLTask):
    name = "mimic_iii"
    dataset = "MIMIC-III"
    db_file = "mimic_iii.db"
    schema = MIMIC_SCHEMA
    overview = MIMIC_OVERVIEW
    split_files: ClassVar[dict[str, str]] = {"test": "valid_tasks.jsonl", "train": "train_tasks.jsonl"}
    # The original shows the canonical template rather than the paraphrased question.
    question_field = "template"

    @classmethod
    def make_sample(cls, out_dir: Path) -> None:
        write_ehrsql_sample(cls, out_dir, es.mimic_rows(), MIMIC_QUESTIONS)
