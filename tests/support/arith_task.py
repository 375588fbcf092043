"""A tiny self-contained task for testing the spine: "Compute A + B" graded as an exact integer."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from medagentgym.grading.answers import NO_ANSWER, submitted_answer, to_number
from medagentgym.tasks.base import Task
from medagentgym.types import ExecResult, TaskInstance, Verdict


class ArithTask(Task):
    name = "arith"

    def make_instance(self, split: str, index: int, record: dict[str, Any]) -> TaskInstance:
        return TaskInstance(self.name, split, index, str(record["id"]),
                            f"Compute {record['a']} + {record['b']}.", record=record)

    def instruction(self) -> str:
        return "You solve arithmetic problems by writing Python. Store the result in `answer`."

    def grade(self, inst: TaskInstance, result: ExecResult, code: str, sandbox: Any) -> Verdict:
        value = submitted_answer(result)
        if value is NO_ANSWER:
            return Verdict(False, 0.0, "no answer")
        if to_number(value) is None:
            return Verdict(False, 0.0, f"got {value!r}", feedback="The answer must be a number.")
        ok = to_number(value) == inst.record["answer"]
        return Verdict(ok, float(ok), "" if ok else f"got {value!r}, expected {inst.record['answer']}")

    def oracle_code(self, inst: TaskInstance) -> str:
        return f"answer = {inst.record['answer']}"

    @classmethod
    def make_sample(cls, out_dir: Path) -> None:
        rng = random.Random(7)
        out_dir.mkdir(parents=True, exist_ok=True)
        for split, n in (("test", 10), ("train", 6)):
            with open(out_dir / f"{split}_tasks.jsonl", "w") as fh:
                for i in range(n):
                    a, b = rng.randint(-50, 50), rng.randint(0, 99)
                    fh.write(json.dumps({"id": f"{split}-{i}", "a": a, "b": b, "answer": a + b}) + "\n")
