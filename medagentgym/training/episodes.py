"""Reading episodes back from run and sweep dirs, and deciding which ones are fit to train on."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from medagentgym.errors import UserError
from medagentgym.runner.records import EPISODES_FILE, EpisodeRecord, iter_records, latest_by_key
from medagentgym.types import EXCLUDED_STATUSES, PARSE_FAILURE, SUCCESS

Message = dict[str, str]


def find_run_dirs(inputs: Iterable[str | Path]) -> list[Path]:
    """Each input is a run dir (holds episodes.jsonl) or a sweep dir (run dirs somewhere below it)."""
    found: list[Path] = []
    for raw in inputs:
        path = Path(raw).expanduser()
        if not path.is_dir():
            raise UserError(
                f"stage.inputs names {str(raw)!r}, which is not a directory. Pass run dirs or sweep dirs "
                "written by the evaluate stage, e.g. \"stage.inputs=[outputs/runs/RUN,outputs/sweeps/SWEEP]\"."
            )
        runs = [path] if (path / EPISODES_FILE).is_file() else sorted(p.parent for p in path.rglob(EPISODES_FILE))
        if not runs:
            raise UserError(
                f"{path} holds no {EPISODES_FILE} (neither directly nor in a sub-directory), so it is not a run "
                "or sweep dir of the evaluate stage. Point stage.inputs at the directories evaluate wrote."
            )
        found.extend(r for r in runs if r not in found)
    return found


def load_episodes(inputs: Iterable[str | Path]) -> list[EpisodeRecord]:
    """The latest record per (index, rollout) of every run; `run` names its run dir when the record lacks it."""
    records: list[EpisodeRecord] = []
    for run_dir in find_run_dirs(inputs):
        for rec in latest_by_key(iter_records(run_dir / EPISODES_FILE)).values():
            rec.run = rec.run or run_dir.name
            records.append(rec)
    return records


def _text(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def clean_messages(messages: list[dict[str, Any]]) -> list[Message]:
    """Only role and content, content always a string: trainers' Arrow loaders need one struct shape."""
    return [{"role": str(m.get("role", "")), "content": _text(m.get("content"))} for m in messages]


def through_last_assistant(messages: list[Message]) -> list[Message]:
    """Drops what follows the last assistant turn (the final observation): nothing there is trained on."""
    for i in range(len(messages) - 1, -1, -1):
        if messages[i]["role"] == "assistant":
            return messages[: i + 1]
    return []


def is_failure(rec: EpisodeRecord) -> bool:
    """An agent failure worth learning from; harness failures and broken instances are not the agent's."""
    return rec.status != SUCCESS and rec.status not in EXCLUDED_STATUSES


def has_parse_failure(rec: EpisodeRecord) -> bool:
    return rec.status == PARSE_FAILURE or any(s.get("action") is None for s in rec.steps)


@dataclass
class Filters:
    min_score: float = 1.0
    max_steps: int | None = None
    drop_loops: bool = True
    drop_parse_failures: bool = True
    dedupe: bool = True


def rejection_reason(rec: EpisodeRecord, f: Filters) -> str | None:
    """Why a successful-looking episode must not be imitated, or None when it may."""
    if rec.status != SUCCESS:
        return "not_success"
    if float(rec.outcome.get("score") or 0.0) < f.min_score:
        return "low_score"
    if f.max_steps is not None and len(rec.steps) > f.max_steps:
        return "too_many_steps"
    if f.drop_loops and rec.loop:
        return "loop"
    if f.drop_parse_failures and has_parse_failure(rec):
        return "parse_failure"
    return None


@dataclass
class Trajectory:
    """A cleaned episode ready for export: messages end at the last assistant turn."""

    record: EpisodeRecord
    messages: list[Message]

    @property
    def instance(self) -> tuple[str, str, int]:
        return (self.record.task, self.record.split, self.record.index)


def select_successes(records: Iterable[EpisodeRecord], f: Filters) -> tuple[list[Trajectory], Counter]:
    """Successful trajectories that pass every filter, plus how many episodes each filter removed."""
    kept: list[Trajectory] = []
    removed: Counter = Counter()
    seen: set[str] = set()
    for rec in records:
        reason = rejection_reason(rec, f)
        messages = through_last_assistant(clean_messages(rec.messages)) if reason is None else []
        if reason is None and not messages:
            reason = "no_assistant_turn"
        if reason is None and f.dedupe:
            key = json.dumps(messages, ensure_ascii=False)
            reason = "duplicate" if key in seen else None
            seen.add(key)
        if reason is None:
            kept.append(Trajectory(rec, messages))
        else:
            removed[reason] += 1
    return kept, removed


def select_failures(records: Iterable[EpisodeRecord]) -> list[Trajectory]:
    out = []
    for rec in records:
        if is_failure(rec):
            messages = through_last_assistant(clean_messages(rec.messages))
            if messages:
                out.append(Trajectory(rec, messages))
    return out
