"""TREQS (MIMICSQL) questions over five denormalised MIMIC-III tables."""

from __future__ import annotations

from pathlib import Path

from medagentgym.tasks import ehr_sample as es
from medagentgym.tasks.ehrsql import EHRSQLTask, parse_schema

TREQS_SCHEMA = parse_schema({
    "demographic": "subject_id i, hadm_id i, name t, marital_status t, age i, dob t, gender t, language t, "
                   "religion t, admission_type t, days_stay i, insurance t, ethnicity t, expire_flag i, "
                   "admission_location t, discharge_location t, diagnosis t, dod t, dob_year i, dod_year i, "
                   "admittime t, dischtime t, admityear i",
    "diagnoses": "subject_id i, hadm_id i, icd9_code t, short_title t, long_title t",
    "procedures": "subject_id i, hadm_id i, icd9_code t, short_title t, long_title t",
    "prescriptions": "subject_id i, hadm_id i, icustay_id i, drug_type t, drug t, formulary_drug_cd t, route t, "
                     "drug_dose t",
    "lab": "subject_id i, hadm_id i, itemid i, charttime t, flag t, value_unit t, label t, fluid t, category t",
})

TREQS_OVERVIEW = (
    "Every table has subject_id (a patient) and hadm_id (a hospital admission); join on hadm_id. demographic "
    "has one row per admission; diagnoses, procedures, prescriptions and lab list that admission's events "
    "with their titles and labels inline."
)

TREQS_QUESTIONS = [
    es.SampleQuestion(
        "how many patients were born before the year {0}?",
        "select count ( distinct demographic.'subject_id' ) from demographic where demographic.'dob_year' < '{0}'",
        "select dob_year from demographic order by dob_year limit 1 offset 6"),
    es.SampleQuestion(
        "how many patients had the diagnosis icd9 code {0}?",
        "select count ( distinct demographic.'subject_id' ) from demographic inner join diagnoses on "
        "demographic.hadm_id = diagnoses.hadm_id where diagnoses.'icd9_code' = '{0}'",
        "select icd9_code from diagnoses order by rowid limit 1"),
    es.SampleQuestion(
        "what is the admission time and procedure of the patient id {0}?",
        "select demographic.'admittime',procedures.'long_title' from demographic inner join procedures on "
        "demographic.hadm_id = procedures.hadm_id where demographic.'subject_id' = '{0}'",
        "select subject_id from demographic order by rowid limit 1 offset 3"),
    es.SampleQuestion(
        "what is the insurance and marital status of patient {0}?",
        "select demographic.'insurance',demographic.'marital_status' from demographic where demographic.'name' = '{0}'",
        "select name from demographic group by name having count(*) = 1 order by name limit 1"),
    es.SampleQuestion(
        "how many patients with {0} ethnicity stayed in the hospital for more than {1} days?",
        "select count ( distinct demographic.'subject_id' ) from demographic where demographic.'ethnicity' = '{0}' "
        "and demographic.'days_stay' > '{1}'",
        "select ethnicity, min(days_stay) from demographic group by ethnicity order by count(*) desc limit 1"),
    es.SampleQuestion(
        "how many patients were prescribed {0} via route {1}?",
        "select count ( distinct demographic.'subject_id' ) from demographic inner join prescriptions on "
        "demographic.hadm_id = prescriptions.hadm_id where prescriptions.'drug' = '{0}' and "
        "prescriptions.'route' = '{1}'",
        "select drug, route from prescriptions order by rowid limit 1 offset 2"),
    es.SampleQuestion(
        "how many patients had a {0} lab test with abnormal status {1}?",
        "select count ( distinct demographic.'subject_id' ) from demographic inner join lab on "
        "demographic.hadm_id = lab.hadm_id where lab.'label' = '{0}' and lab.'flag' = '{1}'",
        "select label, flag from lab where flag is not null order by rowid limit 1"),
    es.SampleQuestion(
        "what is the average age of patients whose admission type is {0}?",
        "select avg ( demographic.'age' ) from demographic where demographic.'admission_type' = '{0}'",
        "select admission_type from demographic order by rowid limit 1"),
]


class Treqs(EHRSQLTask):
    name = "treqs"
    dataset = "TREQS (MIMICSQL)"
    db_file = "treqs.db"
    schema = TREQS_SCHEMA
    overview = TREQS_OVERVIEW
    source = "MIMIC-III (MIMICSQL's tables)"
    relative_time = False  # no TREQS query refers to the current time

    @classmethod
    def make_sample(cls, out_dir: Path) -> None:
        db = es.write_database(out_dir, cls.db_file, cls.schema, es.treqs_rows(), cls.csv_style)
        records = [
            # The real test file's rows carry split "valid"; the sample keeps that.
            {"db_id": cls.name, "question": q, "query": sql, "is_impossible": False, "split": "valid",
             "id": es.row_id(cls.name, q), "answer": gold}
            for q, sql, gold in es.answer_questions(db, TREQS_QUESTIONS)
        ]
        es.write_jsonl(out_dir / cls.split_files["test"], records)
        es.write_jsonl(out_dir / cls.split_files["train"], [{**r, "split": "train"} for r in records[:4]])
