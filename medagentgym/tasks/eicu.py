"""eICU questions (EHRSQL): natural-language questions answered by querying the eICU database."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from medagentgym.tasks import ehr_sample as es
from medagentgym.tasks.ehrsql import EHRSQLTask, parse_schema
from medagentgym.tasks.mimic_iii import write_ehrsql_sample

EICU_SCHEMA = parse_schema({
    "patient": "uniquepid t, patienthealthsystemstayid i, patientunitstayid i, gender t, age t, ethnicity t, "
               "hospitalid i, wardid i, admissionheight r, admissionweight r, dischargeweight r, "
               "hospitaladmittime t, hospitaladmitsource t, unitadmittime t, unitdischargetime t, "
               "hospitaldischargetime t, hospitaldischargestatus t",
    "diagnosis": "diagnosisid i, patientunitstayid i, diagnosisname t, diagnosistime t, icd9code t",
    "treatment": "treatmentid i, patientunitstayid i, treatmentname t, treatmenttime t",
    "lab": "labid i, patientunitstayid i, labname t, labresult r, labresulttime t",
    "medication": "medicationid i, patientunitstayid i, drugname t, dosage t, routeadmin t, drugstarttime t, "
                  "drugstoptime t",
    "cost": "costid i, uniquepid t, patienthealthsystemstayid i, eventtype t, eventid i, chargetime t, cost r",
    "allergy": "allergyid i, patientunitstayid i, drugname t, allergyname t, allergytime t",
    "intakeoutput": "intakeoutputid i, patientunitstayid i, cellpath t, celllabel t, cellvaluenumeric r, "
                    "intakeoutputtime t",
    "microlab": "microlabid i, patientunitstayid i, culturesite t, organism t, culturetakentime t",
    "vitalperiodic": "vitalperiodicid i, patientunitstayid i, temperature r, sao2 r, heartrate r, respiration r, "
                     "systemicsystolic r, systemicdiastolic r, systemicmean r, observationtime t",
})

EICU_OVERVIEW = (
    "uniquepid identifies a patient, patienthealthsystemstayid a hospital stay and patientunitstayid an ICU "
    "unit stay; the patient table links them and the other tables join on patientunitstayid (cost on "
    "uniquepid and patienthealthsystemstayid). lab, intakeoutput, microlab and vitalperiodic hold "
    "measurements; allergy, cost, diagnosis, medication and treatment are what their names say."
)

_STAYS_OF = (
    "select patient.patientunitstayid from patient where patient.patienthealthsystemstayid in ( select "
    "patient.patienthealthsystemstayid from patient where patient.uniquepid = '{0}' )"
)
EICU_QUESTIONS = [
    es.SampleQuestion(
        "what is the intake method of {0}?",
        "select distinct medication.routeadmin from medication where medication.drugname = '{0}'",
        "select drugname from medication group by drugname order by count(distinct routeadmin) desc, drugname limit 1"),
    es.SampleQuestion(
        "how many days have passed since patient {0} was admitted to the hospital?",
        "select 1 * ( strftime('%j',current_time) - strftime('%j',patient.hospitaladmittime) ) from patient "
        "where patient.uniquepid = '{0}' and patient.hospitaldischargetime is null",
        "select uniquepid from patient where hospitaldischargetime is null order by uniquepid limit 1"),
    es.SampleQuestion(
        "what was the maximum {1} value of patient {0}?",
        "select max(lab.labresult) from lab where lab.patientunitstayid in ( " + _STAYS_OF + " ) and "
        "lab.labname = '{1}'",
        "select patient.uniquepid, lab.labname from lab join patient using (patientunitstayid) "
        "order by lab.labid limit 1 offset 4"),
    es.SampleQuestion(
        "has patient {0} received a diagnosis of {1}?",
        "select count(*)>0 from diagnosis where diagnosis.patientunitstayid in ( " + _STAYS_OF + " ) and "
        "diagnosis.diagnosisname = '{1}'",
        "select patient.uniquepid, diagnosis.diagnosisname from diagnosis join patient using (patientunitstayid) "
        "order by diagnosis.diagnosisid limit 1 offset 3"),
    es.SampleQuestion(
        "what treatments did patient {0} receive since 12 months ago?",
        "select distinct treatment.treatmentname from treatment where treatment.patientunitstayid in ( "
        + _STAYS_OF + " ) and datetime(treatment.treatmenttime) >= datetime(current_time,'-12 month')",
        "select uniquepid from patient where hospitaldischargetime is null order by uniquepid desc limit 1"),
    es.SampleQuestion(
        "what is the gender of patient {0}?",
        "select distinct patient.gender from patient where patient.uniquepid = '{0}'",
        "select uniquepid from patient order by patientunitstayid limit 1 offset 2"),
    es.SampleQuestion(
        "what is the total hospital cost of patient {0}?",
        "select sum(cost.cost) from cost where cost.uniquepid = '{0}'",
        "select uniquepid from cost order by costid limit 1 offset 6"),
    es.SampleQuestion(
        "how many patients were diagnosed with {0}?",
        "select count( distinct patient.uniquepid ) from patient where patient.patientunitstayid in ( select "
        "diagnosis.patientunitstayid from diagnosis where diagnosis.diagnosisname = '{0}' )",
        "select diagnosisname from diagnosis order by diagnosisid limit 1"),
]


class Eicu(EHRSQLTask):
    name = "eicu"
    dataset = "eICU"
    db_file = "eicu.db"
    schema = EICU_SCHEMA
    overview = EICU_OVERVIEW
    csv_style = "lower"
    source = "the eICU Collaborative Research Database"
    split_files: ClassVar[dict[str, str]] = {"test": "valid_tasks.jsonl", "train": "train_tasks.jsonl"}
    question_field = "template"

    @classmethod
    def make_sample(cls, out_dir: Path) -> None:
        write_ehrsql_sample(cls, out_dir, es.eicu_rows(), EICU_QUESTIONS)
