"""Synthetic BioDSBench studies and questions.

Two made-up studies with small patient, sample and mutation tables. Each question's reference code (written
against /workdir as in the original files) is run here on the generated tables, and its asserts are built
from the values it produces.
"""

from __future__ import annotations

import json
import os
import random
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

STUDIES = ("90000001", "90000002")
GENES = ("TP53", "KRAS", "PIK3CA", "EGFR", "BRAF", "MYC", "PTEN")
_STEPS = "Load the tables you need with pandas, compute the value, save it under the given name."
_LOAD = 'import pandas as pd\n{name} = pd.read_csv("/workdir/{name}.csv")\n'


def _tables(study: str) -> dict[str, pd.DataFrame]:
    rng = random.Random(f"biodsbench-{study}")
    n = 24 if study == STUDIES[0] else 18
    patients = pd.DataFrame(
        {
            "PATIENT_ID": [f"P{study[-1]}-{i:03d}" for i in range(n)],
            "AGE": [rng.randint(28, 85) for _ in range(n)],
            "SEX": [rng.choice(["Male", "Female"]) for _ in range(n)],
            "IPI": [rng.randint(0, 5) for _ in range(n)],
            "OS_MONTHS": [round(rng.uniform(1, 120), 2) for _ in range(n)],
            "OS_STATUS": [rng.choice(["0:LIVING", "1:DECEASED"]) for _ in range(n)],
        }
    )
    samples = pd.DataFrame(
        {
            "SAMPLE_ID": [f"{p}-T" for p in patients.PATIENT_ID],
            "PATIENT_ID": patients.PATIENT_ID,
            "SAMPLE_TYPE": [rng.choice(["Primary", "Metastasis"]) for _ in range(n)],
        }
    )
    muts = [
        (
            rng.choices(GENES, weights=(6, 4, 3, 2, 2, 1, 1))[0],
            s,
            rng.choice(["Missense_Mutation", "Nonsense_Mutation"]),
        )
        for s in samples.SAMPLE_ID
        for _ in range(rng.randint(0, 4))
    ]
    mutations = pd.DataFrame(muts, columns=["Hugo_Symbol", "Tumor_Sample_Barcode", "Variant_Classification"])
    return {"data_clinical_patient": patients, "data_clinical_sample": samples, "data_mutations": mutations}


def _describe(name: str, df: pd.DataFrame) -> str:
    return (
        f"A Dataframe stored in `/workdir/{name}.csv`. Dataframe schema: A Pandas Dataframe whose name is "
        f"`{name}`. Shape is {df.shape}. \nThe first five rows (`{name}.head().to_string()`):\n\n"
        f"{df.head().to_string()}\n"
    )


def _number(var: str) -> Callable[[dict[str, Any]], str]:
    return lambda ns: (
        f"assert {var} == {ns[var]!r}"
        if isinstance(ns[var], (int, str))
        else f"assert abs({var} - {float(ns[var])!r}) < 1e-8"
    )


def _series(var: str) -> Callable[[dict[str, Any]], str]:
    return lambda ns: (
        f"assert len({var}) == {len(ns[var])}\nassert {var}.sum() == {int(ns[var].sum())}\n"
        f"assert {var}.max() == {int(ns[var].max())}"
    )


_RISK_CELL = (
    _LOAD.format(name="data_clinical_patient")
    + "data_clinical_patient['RISK'] = data_clinical_patient['IPI'].apply("
    "lambda s: 'High' if s >= 3 else 'Low')\n"
    "high_risk = data_clinical_patient[data_clinical_patient['RISK'] == 'High']\n"
)

# (study, question, setup cells, reference code, tables described, assert builder)
_QUESTIONS = [
    (
        STUDIES[0],
        "How many patients died during follow-up? Save the count as `n_deceased`.",
        [],
        _LOAD.format(name="data_clinical_patient")
        + "n_deceased = int((data_clinical_patient['OS_STATUS'] == '1:DECEASED').sum())\n",
        ["data_clinical_patient"],
        _number("n_deceased"),
    ),
    (
        STUDIES[0],
        "What is the median age of the patients? Save it as `median_age`.",
        [],
        _LOAD.format(name="data_clinical_patient") + "median_age = float(data_clinical_patient['AGE'].median())\n",
        ["data_clinical_patient"],
        _number("median_age"),
    ),
    (
        STUDIES[0],
        "Which gene carries the most mutations? Save its Hugo symbol as `top_gene`.",
        [],
        _LOAD.format(name="data_mutations") + "top_gene = data_mutations['Hugo_Symbol'].value_counts().idxmax()\n",
        ["data_mutations"],
        _number("top_gene"),
    ),
    (
        STUDIES[0],
        "What is the mean overall survival in months of the high-risk patients? Save it as `mean_os_high`.",
        [_RISK_CELL],
        "mean_os_high = float(high_risk['OS_MONTHS'].mean())\n",
        ["data_clinical_patient"],
        _number("mean_os_high"),
    ),
    (
        STUDIES[1],
        "Count the mutations of each patient (patients without mutations count 0). Save a Series "
        "indexed by PATIENT_ID as `mutation_counts`.",
        [],
        _LOAD.format(name="data_clinical_sample")
        + _LOAD.format(name="data_mutations")
        + "per_sample = data_mutations['Tumor_Sample_Barcode'].value_counts()\n"
        "mutation_counts = (data_clinical_sample.set_index('PATIENT_ID')['SAMPLE_ID']"
        ".map(per_sample).fillna(0).astype(int))\n",
        ["data_clinical_sample", "data_mutations"],
        _series("mutation_counts"),
    ),
    (
        STUDIES[1],
        "What fraction of patients have at least one TP53 mutation? Save it as `tp53_fraction`.",
        [],
        _LOAD.format(name="data_clinical_sample")
        + _LOAD.format(name="data_mutations")
        + "tp53 = set(data_mutations.loc[data_mutations['Hugo_Symbol'] == 'TP53', 'Tumor_Sample_Barcode'])\n"
        "tp53_fraction = data_clinical_sample['SAMPLE_ID'].isin(tp53).mean()\n",
        ["data_clinical_sample", "data_mutations"],
        _number("tp53_fraction"),
    ),
]


def _run_reference(cells: list[str], reference: str, study_dir: Path) -> dict[str, Any]:
    source = "\n".join([*cells, reference]).replace("/workdir", str(study_dir))
    ns: dict[str, Any] = {"__name__": "__main__"}
    cwd = os.getcwd()
    with tempfile.TemporaryDirectory() as tmp:
        os.chdir(tmp)  # setup cells may write files next to themselves
        try:
            exec(compile(source, "<reference>", "exec"), ns)
        finally:
            os.chdir(cwd)
    return ns


def write_sample(out_dir: Path, split_files: dict[str, str]) -> None:
    tables = {}
    for study in STUDIES:
        study_dir = out_dir / "data" / study
        study_dir.mkdir(parents=True)
        tables[study] = _tables(study)
        for name, df in tables[study].items():
            df.to_csv(study_dir / f"{name}.csv", index=False)
    rows = []
    for qid, (study, query, cells, reference, described, make_tests) in enumerate(_QUESTIONS, 1):
        ns = _run_reference(cells, reference, (out_dir / "data" / study).resolve())
        rows.append(
            {
                "queries": query,
                "chat_histories": "[]",
                "dataframes": "\n".join(_describe(n, tables[study][n]) for n in described),
                "reference_codes": "[]",
                "code_histories": repr(cells),
                "study_ids": study,
                "question_ids": str(qid),
                "test_cases": make_tests(ns),
                "reference_answer": reference,
                "cot_instructions": _STEPS,
            }
        )
    for split, part in (("test", rows), ("train", rows[:3])):
        with open(out_dir / split_files[split], "w", encoding="utf-8") as fh:
            fh.writelines(json.dumps(r) + "\n" for r in part)
