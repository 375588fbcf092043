"""build-sft-data: episodes -> verl multi-turn SFT parquet + OpenRLHF DPO JSONL + a short report.

Layout of the output directory (the sft / dpo stages accept it as is):
    sft/train.parquet  sft/val.parquet   one row per trajectory, a `messages` column plus provenance
    dpo/train.jsonl    dpo/val.jsonl     prompt / chosen / rejected message lists plus provenance
    report.json
Splits are by task instance, so no instance leaks from train into val.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from medagentgym.errors import UserError
from medagentgym.training.episodes import Filters, Trajectory, load_episodes, select_failures, select_successes
from medagentgym.training.pairs import PairSpec, build_pairs

SFT_DIR, DPO_DIR, REPORT_FILE = "sft", "dpo", "report.json"
MESSAGE_TYPE = pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))
SFT_SCHEMA = pa.schema(
    [
        ("messages", MESSAGE_TYPE),
        ("task", pa.string()),
        ("split", pa.string()),
        ("index", pa.int64()),
        ("rollout", pa.int64()),
        ("task_id", pa.string()),
        ("model", pa.string()),
        ("run", pa.string()),
        ("score", pa.float64()),
        ("num_steps", pa.int64()),
    ]
)
# Rough tokens per character of English and code, enough to size a run before tokenising anything.
CHARS_PER_TOKEN = 4


@dataclass
class ExportSpec:
    filters: Filters = field(default_factory=Filters)
    pairs: PairSpec = field(default_factory=PairSpec)
    val_fraction: float = 0.1
    seed: int = 0
    first_n: int | None = None  # keep only N random successes (a warm-up set)
    sft: bool = True
    dpo: bool = True


def split_by_instance(items: list, key, val_fraction: float, seed: int) -> tuple[list, list]:
    """Seeded split of whole instances; at least one val instance when asked for val and there are two."""
    if not 0.0 <= val_fraction < 1.0:
        raise UserError(
            f"stage.val_fraction={val_fraction} must be in [0, 1): the share of task instances kept for validation."
        )
    instances = sorted({key(x) for x in items})
    random.Random(seed).shuffle(instances)
    n_val = round(len(instances) * val_fraction)
    if val_fraction > 0 and n_val == 0 and len(instances) >= 2:
        n_val = 1
    val = set(instances[:n_val])
    return [x for x in items if key(x) not in val], [x for x in items if key(x) in val]


def sft_row(t: Trajectory) -> dict[str, Any]:
    r = t.record
    return {
        "messages": t.messages,
        "task": r.task,
        "split": r.split,
        "index": r.index,
        "rollout": r.rollout,
        "task_id": r.task_id,
        "model": r.model,
        "run": r.run,
        "score": float(r.outcome.get("score") or 0.0),
        "num_steps": len(r.steps),
    }


def write_parquet(rows: list[dict[str, Any]], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=SFT_SCHEMA), path)


def write_jsonl(rows: list[dict[str, Any]], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        fh.writelines(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)


def _tokens(message_lists: list[list[dict[str, str]]]) -> int:
    return sum(len(m["content"]) for ms in message_lists for m in ms) // CHARS_PER_TOKEN


def _write_split(rows: list[dict], writer, out: Path, name: str, ext: str, spec: ExportSpec) -> dict[str, Any]:
    train, val = split_by_instance(rows, lambda r: (r["task"], r["split"], r["index"]), spec.val_fraction, spec.seed)
    files = {}
    for part, part_rows in (("train", train), ("val", val)):
        if part_rows:
            path = out / name / f"{part}.{ext}"
            writer(part_rows, path)
            files[part] = str(path)
    return {"train_rows": len(train), "val_rows": len(val), "files": files}


def export(inputs: list[str], out: Path, spec: ExportSpec) -> dict[str, Any]:
    """Writes the SFT and DPO files under `out` and returns the report (also written as report.json)."""
    records = load_episodes(inputs)
    successes, removed = select_successes(records, spec.filters)
    report: dict[str, Any] = {"episodes": len(records), "statuses": dict(Counter(r.status for r in records))}
    if spec.first_n is not None:
        random.Random(spec.seed).shuffle(successes)
        removed["beyond_first_n"] += max(0, len(successes) - spec.first_n)
        successes = sorted(successes[: spec.first_n], key=lambda t: (t.instance, t.record.rollout))
    report["removed"] = {k: v for k, v in sorted(removed.items()) if k != "not_success"}
    if spec.sft:
        rows = [sft_row(t) for t in successes]
        sft = _write_split(rows, write_parquet, out, SFT_DIR, "parquet", spec)
        sft["est_tokens"] = _tokens([r["messages"] for r in rows])
        sft["per_task"] = dict(sorted(Counter(r["task"] for r in rows).items()))
        report["sft"] = sft
    if spec.dpo:
        pairs, dropped = build_pairs(successes, select_failures(records), spec.pairs)
        dpo = _write_split(pairs, write_jsonl, out, DPO_DIR, "jsonl", spec)
        dpo["est_tokens"] = _tokens([p["prompt"] + p["chosen"] + p["rejected"] for p in pairs])
        dpo["per_task"] = dict(sorted(Counter(p["task"] for p in pairs).items()))
        dpo["dropped"] = dropped
        report["dpo"] = dpo
    out.mkdir(parents=True, exist_ok=True)
    (out / REPORT_FILE).write_text(json.dumps(report, indent=2) + "\n")
    return report


def format_report(report: dict[str, Any]) -> str:
    lines = [f"episodes read: {report['episodes']}  statuses: {report['statuses']}"]
    removed = ", ".join(f"{k}={v}" for k, v in report["removed"].items()) or "none"
    lines.append(f"successes removed by filters: {removed}")
    for name in ("sft", "dpo"):
        if name in report:
            part = report[name]
            lines.append(
                f"{name}: {part['train_rows']} train / {part['val_rows']} val rows, ~{part['est_tokens']} tokens, "
                f"per task {part['per_task']}"
            )
            lines.extend(f"  {k}: {v}" for k, v in part["files"].items())
    if "dpo" in report:
        lines.append(f"dpo candidate pairs dropped: {report['dpo']['dropped']}")
    return "\n".join(lines)
