"""N-PowerAI: sample-size and power questions for common study designs.

Task files: ``test_tasks.jsonl`` / ``train_tasks.jsonl`` with task_type, task_id (the question template, shared
by many rows), estimate_target ("size" or "power"), question and answer.
"""

from __future__ import annotations

import json
import math
import random
from pathlib import Path
from statistics import NormalDist
from typing import Any

from medagentgym.grading.answers import NO_ANSWER, submitted_answer, to_number
from medagentgym.grading.numeric import as_integer, within_relative
from medagentgym.sandbox.base import Sandbox
from medagentgym.tasks.base import Task
from medagentgym.types import ExecResult, TaskInstance, Verdict

POWER_REL_TOL = 0.01
_FIELDS = ("task_type", "estimate_target", "question", "answer")


def gold_usable(gold: Any, target: str) -> bool:
    if target == "size":
        return as_integer(gold) is not None and as_integer(gold) > 0
    if target == "power":
        g = to_number(gold)
        return g is not None and 0 < g <= 1
    return False


def check_answer(value: Any, gold: Any, target: str) -> tuple[bool, str]:
    """Grade one submitted value; (correct, reason). Sizes: the same integer. Power: within 1% relative."""
    if value is NO_ANSWER:
        return False, "no answer: the code failed or set no `answer` and printed nothing"
    if target == "size":
        got = as_integer(value)
        if got is None:
            return False, f"a sample size must be a whole number, got {value!r}"
        return got == as_integer(gold), "sample size matches" if got == as_integer(gold) else "wrong sample size"
    if to_number(value) is None:
        return False, f"expected a single number for the power, got {value!r}"
    ok = within_relative(value, gold, POWER_REL_TOL)
    return ok, "power within 1% of the reference" if ok else "power differs from the reference by more than 1%"


class NPowerAI(Task):
    name = "npowerai"
    record_fields = _FIELDS

    def make_instance(self, split: str, index: int, record: dict[str, Any]) -> TaskInstance:
        target = record["estimate_target"]
        what = (
            "the required sample size as a whole number (round up)"
            if target == "size"
            else "the statistical power as a proportion between 0 and 1"
        )
        goal = (
            f"{record['question'].strip()}\n\n"
            f"Write Python code that computes {what} and stores it in the variable `answer`."
        )
        # The file's task_id names the question template and repeats across rows, so the row index is the id.
        ctx = {"task_type": record["task_type"], "estimate_target": target, "template_id": record.get("task_id")}
        return TaskInstance(self.name, split, index, str(index), goal, ctx, record)

    def instruction(self) -> str:
        return (
            "You are a biostatistician planning studies. Each question describes a study design and asks "
            "either for the minimum sample size that reaches a target power or for the power of a given "
            "sample size. Solve it with Python (scipy and statsmodels help where installed) and store the "
            "result in a variable named `answer`: an integer for sample sizes, a proportion in [0, 1] for "
            "power. Sample sizes must match exactly; power passes within 1% of the reference value."
        )

    def grade(self, inst: TaskInstance, result: ExecResult, code: str, sandbox: Sandbox) -> Verdict:
        gold, target = inst.record["answer"], inst.record["estimate_target"]
        if not gold_usable(gold, target):
            return Verdict(False, reason=f"gold {gold!r} is not a usable {target!r} answer", status="invalid_task")
        ok, reason = check_answer(submitted_answer(result), gold, target)
        return Verdict(ok, 1.0 if ok else 0.0, reason)

    def oracle_code(self, inst: TaskInstance) -> str:
        return f"answer = {inst.record['answer']!r}\nprint(answer)\n"

    @classmethod
    def make_sample(cls, out_dir: Path) -> None:
        rng = random.Random("npowerai")
        rows = [maker(rng, target) for maker, target in _SAMPLE_PLAN]
        for split, part in (("test", rows), ("train", rows[:4])):
            with open(Path(out_dir) / cls.split_files[split], "w", encoding="utf-8") as fh:
                fh.writelines(json.dumps(r) + "\n" for r in part)


# ---- synthetic sample ------------------------------------------------------------------------------
# Sample questions state a known standard deviation (z-tests) or the Schoenfeld approximation (Cox), so
# their gold has a closed form in the standard library:
#   two-sided power  = Phi(e - z_{1-a/2}) + Phi(-e - z_{1-a/2}),  e = effect / standard error at n
#   one-sided power  = Phi(e - z_{1-a})
#   one-sample / paired size  = ceil(((z_a + z_b) * sd / delta)^2)
#   two-sample size per group = ceil((z_a + z_b)^2 * (sd1^2 + sd2^2) / delta^2)
#   Cox events = (z_a + z_b)^2 / (p1 * p2 * ln(HR)^2); per-group size = ceil(events / (2 * P(event)))
_N = NormalDist()


def _z(alpha: float, sides: int) -> float:
    return _N.inv_cdf(1 - alpha / sides)


def _power(effect: float, alpha: float, sides: int) -> float:
    e, z = abs(effect), _z(alpha, sides)
    return _N.cdf(e - z) + (_N.cdf(-e - z) if sides == 2 else 0.0)


def _row(task_type: str, template: int, target: str, question: str, answer: float) -> dict[str, Any]:
    return {
        "task_type": task_type,
        "task_id": template,
        "estimate_target": target,
        "question": question,
        "answer": answer,
    }


def _one_sample(rng: random.Random, target: str, sides: int = 2) -> dict[str, Any]:
    mu0, sd = 120, round(rng.uniform(8, 15), 1)
    mu1 = round(mu0 - rng.uniform(3, 8), 1)
    test = "two-sided" if sides == 2 else "one-sided (lower)"
    story = (
        f"A dietitian expects a new diet to change mean systolic blood pressure from the population value "
        f"of {mu0} mmHg to {mu1} mmHg; the standard deviation is known to be {sd} mmHg, so a {test} "
        "one-sample z-test at significance level 0.05 will be used."
    )
    if target == "size":
        n = math.ceil(((_z(0.05, sides) + _N.inv_cdf(0.9)) * sd / (mu0 - mu1)) ** 2)
        return _row("One-sample z-test", 1, target, f"{story} How many participants give 90% power?", n)
    n = rng.randint(10, 40)
    power = _power((mu0 - mu1) * math.sqrt(n) / sd, 0.05, sides)
    return _row("One-sample z-test", 1, target, f"{story} With {n} participants, what is the power?", power)


def _two_sample(rng: random.Random, target: str) -> dict[str, Any]:
    delta, sd1, sd2 = round(rng.uniform(6, 12), 1), rng.randint(12, 18), rng.randint(12, 18)
    story = (
        f"Two diets are compared on fasting glucose. The expected difference in means is {delta} mg/dl, with "
        f"known standard deviations {sd1} (diet A) and {sd2} (diet B); a two-sided two-sample z-test at "
        "significance level 0.05 with equal group sizes will be used."
    )
    if target == "size":
        n = math.ceil((_z(0.05, 2) + _N.inv_cdf(0.8)) ** 2 * (sd1**2 + sd2**2) / delta**2)
        return _row("Two-sample z-test", 2, target, f"{story} How many patients per group give 80% power?", n)
    n = rng.randint(15, 50)
    power = _power(delta / math.sqrt((sd1**2 + sd2**2) / n), 0.05, 2)
    return _row("Two-sample z-test", 2, target, f"{story} With {n} patients per group, what is the power?", power)


def _paired(rng: random.Random, target: str) -> dict[str, Any]:
    delta, sd = round(rng.uniform(8, 14), 1), rng.randint(30, 40)
    story = (
        f"A drug is expected to lower cholesterol by {delta} units between paired before/after measurements "
        f"whose differences have a known standard deviation of {sd}; a one-sided paired z-test at "
        "significance level 0.05 will be used."
    )
    if target == "size":
        n = math.ceil(((_z(0.05, 1) + _N.inv_cdf(0.8)) * sd / delta) ** 2)
        return _row("Paired z-test", 3, target, f"{story} How many patients give 80% power?", n)
    n = rng.randint(30, 80)
    power = _power(delta * math.sqrt(n) / sd, 0.05, 1)
    return _row("Paired z-test", 3, target, f"{story} With {n} patients, what is the power?", power)


def _cox(rng: random.Random, target: str) -> dict[str, Any]:
    hr, p_event = round(rng.uniform(0.5, 0.7), 3), round(rng.uniform(0.3, 0.6), 2)
    story = (
        f"A randomised trial with two equal arms compares time to relapse with a Cox model. The hazard ratio "
        f"is assumed to be {hr} and {p_event:.0%} of participants are expected to relapse during follow-up; "
        "use the Schoenfeld approximation for a two-sided test at significance level 0.05."
    )
    if target == "size":
        events = (_z(0.05, 2) + _N.inv_cdf(0.8)) ** 2 / (0.25 * math.log(hr) ** 2)
        n = math.ceil(events / (2 * p_event))
        return _row("Cox proportional-hazards model", 4, target, f"{story} How many per arm give 80% power?", n)
    n = rng.randint(80, 200)
    power = _power(math.sqrt(2 * n * p_event * 0.25) * math.log(hr), 0.05, 2)
    return _row(
        "Cox proportional-hazards model", 4, target, f"{story} With {n} per arm, what is the power?", power
    )


_SAMPLE_PLAN = [
    (_one_sample, "size"),
    (_one_sample, "power"),
    (lambda r, t: _one_sample(r, t, sides=1), "size"),
    (_two_sample, "size"),
    (_two_sample, "power"),
    (_paired, "size"),
    (_paired, "power"),
    (_cox, "size"),
    (_cox, "power"),
    (lambda r, t: _one_sample(r, t, sides=1), "power"),
]
