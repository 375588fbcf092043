"""Shared base of the EHR SQL question-answering tasks (MIMIC-III, eICU, TREQS, EHR-SeqSQL, EHRCon).

Each task is a SQLite database plus, where the original prompts point agents at them, the same tables as
CSV files, beside the task files. A subclass names its database, schema and task-file fields; loading,
the prompt, the set grader, the oracle and request_info live here once.

Relative time ("now", "this year", "N months ago"): the gold queries use SQLite's ``current_time``,
which is the wall clock's time of day only, so inside ``datetime()`` its date is 2000-01-01. The released
gold answers were computed that way. A task can instead fix an explicit "now" (option ``now``, or a
``now.txt`` beside the data, which the synthetic sample writes): the prompt then states it and the
oracle substitutes it for ``current_time``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, ClassVar

from medagentgym.config import TaskConfig
from medagentgym.errors import TaskFileError, UserError
from medagentgym.grading.answers import submitted_answer
from medagentgym.grading.sets import compare_sets
from medagentgym.sandbox.base import Sandbox
from medagentgym.tasks.base import Task
from medagentgym.tasks.lookup import TableLookup
from medagentgym.types import ExecResult, TaskInstance, Verdict

NOW_FILE = "now.txt"
_CURRENT_TIME = re.compile(r"\bcurrent_time\b", re.IGNORECASE)
# A yes/no query ("select count(*)>0 ..."): its gold "1"/"0" is a boolean, so True/False are accepted.
_NOW_FORMAT = re.compile(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}")
_BOOLEAN_QUERY = re.compile(r"^\s*select\s+count\s*\(\s*\*\s*\)\s*>\s*0\b", re.IGNORECASE)


def parse_schema(spec: dict[str, str]) -> dict[str, list[tuple[str, str]]]:
    """{table: "col type, col type"} with types i/r/t -> {table: [(col, SQL type)]}."""
    types = {"i": "INTEGER", "r": "REAL", "t": "TEXT"}
    return {
        table: [(c.split()[0], types[c.split()[1]]) for c in cols.split(",")] for table, cols in spec.items()
    }


def csv_name(table: str, style: str) -> str:
    return f"{table.upper() if style == 'upper' else table}.csv"


def substitute_now(query: str, now: str | None) -> str:
    return query if now is None else _CURRENT_TIME.sub(f"'{now}'", query)


def uses_current_time(query: str) -> bool:
    return bool(_CURRENT_TIME.search(query))


def is_boolean_query(query: str) -> bool:
    return bool(_BOOLEAN_QUERY.match(query))


class EHRSQLTask(Task):
    """A question over an EHR database, answered by a list of result values."""

    db_file: ClassVar[str]
    dataset: ClassVar[str]  # name shown in prompts
    schema: ClassVar[dict[str, list[tuple[str, str]]]]
    overview: ClassVar[str]  # a few sentences about how the tables relate (our own words)
    csv_style: ClassVar[str | None] = "upper"  # None: the original prompt points at the database only
    question_field: ClassVar[str] = "question"
    gold_field: ClassVar[str] = "answer"
    query_field: ClassVar[str] = "query"
    relative_time: ClassVar[bool] = True
    extra_public_files: ClassVar[tuple[str, ...]] = ()
    source: ClassVar[str] = "MIMIC-III"  # the PhysioNet database the task's data derive from

    def __init__(self, cfg: TaskConfig, data_dir: Path):
        super().__init__(cfg, data_dir)
        self.db_path = self.data_dir / self.db_file
        now_file = self.data_dir / NOW_FILE
        self.now: str | None = self.options.get("now") or (
            now_file.read_text().strip() if now_file.is_file() else None
        )
        if self.now is not None and not _NOW_FORMAT.fullmatch(str(self.now)):
            raise UserError(
                f"task.options.now={self.now!r} is not a timestamp; give it as 'YYYY-MM-DD HH:MM:SS' (e.g. "
                "'2105-12-31 23:59:00'), or null to measure relative dates from SQLite's current_time."
            )
        self._lookup = TableLookup(self.db_path)

    @classmethod
    def table_files(cls) -> tuple[str, ...]:
        csvs = () if cls.csv_style is None else tuple(csv_name(t, cls.csv_style) for t in cls.schema)
        return (cls.db_file, *csvs)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "schema" in cls.__dict__:
            cls.public_files = cls.table_files() + cls.extra_public_files

    def how_to_obtain(self) -> str:
        return (
            f"The database and CSVs are derived from {self.source}, a PhysioNet-credentialed dataset: complete "
            "PhysioNet's credentialing and data use agreement, then obtain the processed files from the original "
            f"MedAgentGym data release (its authors share them on request) and put them beside the task files "
            f"(file names: docs/tasks/{self.name}.md)."
        )

    # ---- prompt -----------------------------------------------------------------------------------
    def question(self, record: dict[str, Any]) -> str:
        value = record.get(self.question_field)
        if not isinstance(value, str) or not value.strip():
            raise TaskFileError(
                f"A {self.name} task row has no {self.question_field!r} text; the task file must be the "
                f"original release's format (see docs/tasks/{self.name}.md)."
            )
        return value.strip()

    def where_data_is(self) -> str:
        text = f"The SQLite database is {self.db_path} (open it read-only, e.g. sqlite3.connect)."
        if self.csv_style is not None:
            example = csv_name(next(iter(self.schema)), self.csv_style)
            text += f" The same tables are CSV files in {self.data_dir} (e.g. {example})."
        return text

    def time_note(self) -> str:
        if not self.relative_time:
            return ""
        if self.now:
            return (
                f" Take the current time to be {self.now}: use it wherever the question says now, today, "
                "this year, last month or N days ago (SQLite's current_time is the machine clock; do not use it)."
            )
        return (
            " Relative dates (now, this year, N months ago) are measured from SQLite's current_time, as the "
            "benchmark's reference queries are."
        )

    def answer_format(self) -> str:
        return (
            "Store the result in the variable `answer` as a list of values, one per result cell "
            "(a single value may be given on its own; use None for a NULL result)."
        )

    def make_instance(self, split: str, index: int, record: dict[str, Any]) -> TaskInstance:
        goal = f"Question: {self.question(record)}\n{self.where_data_is()} {self.answer_format()}{self.time_note()}"
        task_id = str(record.get("id") or index)
        context = {"db_path": str(self.db_path), "data_dir": str(self.data_dir)}
        return TaskInstance(self.name, split, index, task_id, goal, context, record)

    def instruction(self) -> str:
        tables = "\n".join(f"- {t}: {', '.join(c for c, _ in cols)}" for t, cols in self.schema.items())
        return (
            f"You answer questions about patients in the {self.dataset} database by writing Python code that "
            f"queries it.\n{self.overview}\nTables and their columns:\n{tables}"
        )

    # ---- grading ----------------------------------------------------------------------------------
    def gold(self, inst: TaskInstance) -> list[Any] | None:
        gold = inst.record.get(self.gold_field)
        return gold if isinstance(gold, list) else None

    def grade(self, inst: TaskInstance, result: ExecResult, code: str, sandbox: Sandbox) -> Verdict:
        gold = self.gold(inst)
        if gold is None:
            return Verdict(False, reason=f"the task row's {self.gold_field!r} is not a list", status="invalid_task")
        query = inst.record.get(self.query_field)
        boolean = isinstance(query, str) and is_boolean_query(query)
        match = compare_sets(gold, submitted_answer(result), boolean=boolean)
        return Verdict(match.correct, float(match.correct), match.reason)

    def oracle_code(self, inst: TaskInstance) -> str:
        query = inst.record.get(self.query_field)
        if not isinstance(query, str):
            return f"answer = {self.gold(inst)!r}\n"
        return (
            "import sqlite3\n"
            f"con = sqlite3.connect({f'file:{self.db_path}?mode=ro'!r}, uri=True)\n"
            f"rows = con.execute({substitute_now(query, self.now)!r}).fetchall()\n"
            "answer = [value for row in rows for value in row]\n"
        )

    # ---- request_info -----------------------------------------------------------------------------
    def request_info(self, params: dict[str, Any]) -> str:
        if not self.db_path.is_file():
            return f"The task database {self.db_path} is missing, so request_info cannot look anything up."
        return self._lookup(params)
