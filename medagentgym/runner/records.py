"""EpisodeRecord and the run dir's episodes.jsonl: atomic appends, crash-tolerant reads, resume keys.

``episodes.jsonl`` is the only thing stages after evaluate read. One line per finished episode; each
line is written with a single ``write`` on an O_APPEND descriptor, so concurrent writers never
interleave and a kill -9 cannot leave half a record behind a newline. A torn tail (a crash inside the
kernel write, a full disk) is detected on read and cut off before appending again.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from medagentgym.secrets import redact
from medagentgym.types import INFRA_STATUSES

EPISODES_FILE = "episodes.jsonl"


@dataclass
class StepRecord:
    step: int
    reply: str  # the model's raw reply
    action: str | None  # parsed action name; None when the reply could not be parsed
    params: dict[str, Any] | None
    observation: str  # the text the agent was shown
    exec_status: str | None = None  # sandbox status of validate_code / terminal
    answer: str | None = None
    verdict: dict[str, Any] | None = None  # {correct, score, reason, status}
    llm_s: float = 0.0
    action_s: float = 0.0


@dataclass
class EpisodeRecord:
    task: str
    split: str
    index: int
    rollout: int
    task_id: str
    model: str
    temperature: float | None
    messages: list[dict[str, str]]  # OpenAI chat format: system, user (goal), assistant, user (obs) ...
    steps: list[dict[str, Any]]
    outcome: dict[str, Any]  # {status, score, reason}
    loop: bool
    usage: dict[str, Any]  # {prompt_tokens, completion_tokens, cost, llm_calls}
    timings: dict[str, float]  # {started_at, wall_s, llm_s, action_s}
    config_hash: str
    run: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> tuple[int, int]:
        return (self.index, self.rollout)

    @property
    def status(self) -> str:
        return self.outcome["status"]

    @property
    def is_infra_failure(self) -> bool:
        return self.status in INFRA_STATUSES

    def to_json(self) -> str:
        # Scrub secret values a model or a server might have echoed back, wherever they ended up.
        return redact(json.dumps(asdict(self), ensure_ascii=False, separators=(",", ":")))

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> EpisodeRecord:
        names = cls.__dataclass_fields__.keys()
        return cls(**{k: v for k, v in d.items() if k in names})


def iter_records(path: Path) -> Iterator[EpisodeRecord]:
    """Complete records of a file; a torn last line (no trailing newline or bad JSON) is skipped."""
    if not path.exists():
        return
    with open(path, "rb") as fh:
        for raw in fh:
            if not raw.endswith(b"\n"):
                return
            try:
                yield EpisodeRecord.from_dict(json.loads(raw))
            except (json.JSONDecodeError, TypeError, KeyError):
                continue


def latest_by_key(records: Iterable[EpisodeRecord]) -> dict[tuple[int, int], EpisodeRecord]:
    """The last record per (index, rollout): a retried infra failure is superseded by its rerun."""
    out: dict[tuple[int, int], EpisodeRecord] = {}
    for rec in records:
        out[rec.key] = rec
    return out


class EpisodeWriter:
    """Appends records to episodes.jsonl from many threads; one write() per record."""

    def __init__(self, run_dir: Path):
        self.path = Path(run_dir) / EPISODES_FILE
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._repair_tail()
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._lock = threading.Lock()

    def _repair_tail(self) -> None:
        if not self.path.exists() or self.path.stat().st_size == 0:
            return
        with open(self.path, "rb+") as fh:
            data = fh.read()
            cut = data.rfind(b"\n") + 1
            if cut != len(data):
                fh.truncate(cut)

    def write(self, record: EpisodeRecord) -> None:
        data = (record.to_json() + "\n").encode("utf-8")
        with self._lock:
            written = os.write(self._fd, data)
            while written < len(data):
                written += os.write(self._fd, data[written:])
        # No fsync per record: a killed process loses nothing that write() returned (it is in the page
        # cache), and an fsync under the lock would serialise every episode on the disk.

    def close(self) -> None:
        os.fsync(self._fd)
        os.close(self._fd)
