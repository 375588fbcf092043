"""EHR-SeqSQL: sequential (follow-up) questions over the MIMIC-III database.

The public release has no EHR-SeqSQL task file. The format assumed here is the one the original harness
reads: each row has ``seed_question`` (the conversation so far), ``question`` (the follow-up to answer)
and ``ans`` (the gold list), plus ``query`` (the follow-up's SQL) and ``id`` when present. The database
and CSVs are laid out as for mimic_iii (``mimic_iii.db`` beside the task files).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from medagentgym.tasks import ehr_sample as es
from medagentgym.tasks.ehrsql import EHRSQLTask
from medagentgym.tasks.mimic_iii import MIMIC_OVERVIEW, MIMIC_QUESTIONS, MIMIC_SCHEMA


class EhrSeqSql(EHRSQLTask):
    name = "ehr_seqsql"
    dataset = "MIMIC-III"
    db_file = "mimic_iii.db"
    schema = MIMIC_SCHEMA
    overview = MIMIC_OVERVIEW
    gold_field = "ans"

    def question(self, record: dict[str, Any]) -> str:
        follow_up = super().question(record)
        seed = str(record.get("seed_question") or "").strip()
        return f"{follow_up}\n(Earlier in this conversation: {seed})" if seed else follow_up

    @classmethod
    def make_sample(cls, out_dir: Path) -> None:
        db = es.write_database(out_dir, cls.db_file, cls.schema, es.mimic_rows(), cls.csv_style)
        answered = es.answer_questions(db, MIMIC_QUESTIONS)
        # Each follow-up is paired with the question before it as its conversation seed.
        records = [
            {"id": es.row_id(cls.name, q), "seed_question": answered[i - 1][0], "question": f"next, {q}",
             "query": sql, "ans": gold}
            for i, (q, sql, gold) in enumerate(answered)
        ]
        es.write_jsonl(out_dir / cls.split_files["test"], records)
        es.write_jsonl(out_dir / cls.split_files["train"], records[:4])
