"""Preference pairs: a success and a failure on the same task instance, cut where they diverge."""

from __future__ import annotations

import random
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from medagentgym.errors import UserError
from medagentgym.training.episodes import Message, Trajectory, through_last_assistant

PAIRINGS = ("all", "zip")


@dataclass
class PairSpec:
    # all: every success x failure of an instance; zip: each trajectory in at most one pair.
    pairing: str = "all"
    max_pairs_per_instance: int | None = 4
    seed: int = 0


Messages = list[Message]


def split_at_divergence(chosen: Messages, rejected: Messages) -> tuple[Messages, Messages, Messages]:
    """(shared prompt, chosen continuation, rejected continuation).

    The prompt stops before an assistant turn so both continuations start with the model's reply, which is
    what OpenRLHF's chat-template path and TRL's DPO collator expect.
    """
    n = 0
    while n < min(len(chosen), len(rejected)) and chosen[n] == rejected[n]:
        n += 1

    def replies_at(k: int) -> bool:
        return k < len(chosen) and k < len(rejected) and chosen[k]["role"] == rejected[k]["role"] == "assistant"

    while n > 0 and not replies_at(n):
        n -= 1
    return chosen[:n], through_last_assistant(chosen[n:]), through_last_assistant(rejected[n:])


def _row(prompt: Messages, good: Trajectory, bad: Trajectory, c: Messages, r: Messages) -> dict[str, Any]:
    g, b = good.record, bad.record
    return {
        "prompt": prompt,
        "chosen": c,
        "rejected": r,
        "task": g.task,
        "split": g.split,
        "index": g.index,
        "task_id": g.task_id,
        "chosen_rollout": g.rollout,
        "rejected_rollout": b.rollout,
        "chosen_model": g.model,
        "rejected_model": b.model,
        "chosen_run": g.run,
        "rejected_run": b.run,
        "rejected_status": b.status,
    }


def build_pairs(
    successes: list[Trajectory], failures: list[Trajectory], spec: PairSpec
) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """DPO rows plus counts of candidate pairs dropped and why."""
    if spec.pairing not in PAIRINGS:
        raise UserError(
            f"stage.dpo_pairing={spec.pairing!r} is not a pairing strategy; use one of {', '.join(PAIRINGS)}."
        )
    rng = random.Random(spec.seed)
    goods: dict[tuple, list[Trajectory]] = defaultdict(list)
    bads: dict[tuple, list[Trajectory]] = defaultdict(list)
    for t in successes:
        goods[t.instance].append(t)
    for t in failures:
        bads[t.instance].append(t)
    rows: list[dict[str, Any]] = []
    dropped = {"no_shared_prompt": 0, "identical": 0, "over_limit": 0}
    for inst in sorted(set(goods) & set(bads)):
        g, b = list(goods[inst]), list(bads[inst])
        rng.shuffle(g)
        rng.shuffle(b)
        candidates = [(x, y) for x in g for y in b] if spec.pairing == "all" else list(zip(g, b))
        made = 0
        for good, bad in candidates:
            if spec.max_pairs_per_instance is not None and made >= spec.max_pairs_per_instance:
                dropped["over_limit"] += 1
                continue
            prompt, c, r = split_at_divergence(good.messages, bad.messages)
            if not any(m["role"] == "user" for m in prompt):
                dropped["no_shared_prompt"] += 1
            elif not c or not r or c == r:
                dropped["identical"] += 1
            else:
                rows.append(_row(prompt, good, bad, c, r))
                made += 1
    return rows, dropped
