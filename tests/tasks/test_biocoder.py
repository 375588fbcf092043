"""BioCoder: splicing, reference caching and validity, golden grader cases, sample oracle, real-file shape."""

from __future__ import annotations

import ast
import json
import os

import pytest

from medagentgym.sandbox import create_sandbox
from medagentgym.tasks import biocoder
from medagentgym.tasks.biocoder import MARKER, BioCoder, marker_problem, splice
from medagentgym.types import TaskInstance
from tests.tasks.roundtrip import SANDBOX, TRACEBACK, ok, real_task, run_and_grade, sample_task

CONTEXT = (
    f"import math\nclass Box:\n    def __init__(self, x):\n        self.x = x\n    {MARKER}\n"
    "def main():\n    print(Box(3).area())\nif __name__ == '__main__':\n    main()\n"
)


@pytest.fixture(scope="module")
def task(tmp_path_factory):
    return sample_task(BioCoder, tmp_path_factory.mktemp("data"))


@pytest.fixture
def fresh_task(tmp_path, task):
    """A task with its own disk cache and an empty process cache."""
    biocoder._REFERENCE_CACHE.clear()
    return BioCoder(
        task.cfg.__class__(**{**task.cfg.__dict__, "options": {"cache_dir": str(tmp_path / "c")}}), task.data_dir
    )


def make_inst(context: str, solution: str, signature: str = "def area(self)") -> TaskInstance:
    rec = {"idx": "x", "problem": "p", "signature": signature, "context": context, "solution": solution}
    return TaskInstance("biocoder", "test", 0, "x", "goal", record=rec)


def grade_code(task: BioCoder, inst: TaskInstance, code: str):
    with create_sandbox(SANDBOX, task.sandbox_spec(inst)) as sb:
        return task.grade(inst, sb.run_python(code), code, sb)


def test_splice_keeps_marker_indentation():
    code = "\n    def area(self):\n        return self.x ** 2\n"  # over-indented submissions are dedented first
    program = splice(CONTEXT, code)
    assert "    def area(self):\n        return self.x ** 2\ndef main():" in program
    assert MARKER not in program
    ast.parse(program)


@pytest.mark.parametrize(
    ("context", "expected"),
    [
        (CONTEXT, None),
        (CONTEXT.replace(MARKER, "# " + MARKER), "not alone"),
        (CONTEXT + MARKER + "\n", "2 insertion markers"),
        (CONTEXT.replace("def main", "    def area(self):\n        return 0\ndef main"), "again after"),
    ],
)
def test_marker_problems(context, expected):
    problem = marker_problem(context, "def area(self)")
    assert problem is None if expected is None else expected in problem


def test_golden_cases(fresh_task):
    inst = make_inst(CONTEXT, "def area(self):\n    return self.x * self.x\n")
    assert grade_code(fresh_task, inst, "def area(self):\n    return self.x ** 2\n").correct
    assert grade_code(fresh_task, inst, "def area(self):\n  return math.pow(self.x, 2) and 9\n").correct
    wrong = grade_code(fresh_task, inst, "def area(self):\n    return self.x * 2\n")
    assert wrong.status == "graded" and not wrong.correct
    # Printing the expected output without a working function fails: the program then crashes.
    assert not grade_code(fresh_task, inst, "print(9)\n").correct
    assert not grade_code(fresh_task, inst, "").correct
    for stdout in ("0", "1", "True", "", "9"):
        with create_sandbox(SANDBOX, fresh_task.sandbox_spec(inst)) as sb:
            assert not fresh_task.grade(inst, ok(stdout=stdout), "answer = 9", sb).correct
            assert not fresh_task.grade(inst, TRACEBACK, "def area(self):\n    return 9\n", sb).correct


def test_workspace_files_cannot_shadow_modules(fresh_task):
    inst = make_inst(CONTEXT, "def area(self):\n    return self.x * self.x\n")
    with create_sandbox(SANDBOX, fresh_task.sandbox_spec(inst)) as sb:
        (sb.workspace / "math.py").write_text("print(9)\nimport sys\nsys.exit(0)\n")
        code = "def area(self):\n    return 0\n"
        assert not fresh_task.grade(inst, sb.run_python(code), code, sb).correct


@pytest.mark.parametrize(
    ("solution", "reason"),
    [
        ("def area(self):\n    return 1 / 0\n", "fails"),
        ("def area(self):\n    import secrets\n    return secrets.token_hex(8)\n", "different output"),
        ("def area(self):\n    import no_such_module_xyz\n", "no_such_module_xyz"),
    ],
)
def test_unusable_references_are_invalid(fresh_task, solution, reason):
    inst = make_inst(CONTEXT, solution)
    verdict = grade_code(fresh_task, inst, "def area(self):\n    return 9\n")
    assert verdict.status == "invalid_task" and reason in verdict.reason


def test_silent_reference_is_invalid(fresh_task):
    inst = make_inst(CONTEXT.replace("print(Box(3).area())", "Box(3).area()"), "def area(self):\n    return 9\n")
    assert grade_code(fresh_task, inst, inst.record["solution"]).status == "invalid_task"


def test_program_that_ignores_the_function_is_invalid(fresh_task):
    inst = make_inst(CONTEXT.replace("print(Box(3).area())", "print(Box(3).x)"), "def area(self):\n    return 9\n")
    verdict = grade_code(fresh_task, inst, "def area(self):\n    return 0\n")
    assert verdict.status == "invalid_task" and "without a working area()" in verdict.reason


def test_reference_drift_found_when_a_submission_differs(fresh_task):
    # Stable for its first two runs (when the expected output is taken), different afterwards: like an
    # unseeded coin flip that happened to agree with itself.
    drifting = (
        "def area(self):\n    import os\n    path = os.path.join(os.environ['HOME'], 'runs')\n"
        "    n = int(open(path).read()) if os.path.exists(path) else 0\n"
        "    open(path, 'w').write(str(n + 1))\n    return 9 if n < 2 else 10\n"
    )
    inst = make_inst(CONTEXT, drifting)
    with create_sandbox(SANDBOX, fresh_task.sandbox_spec(inst)) as sb:
        code = "def area(self):\n    return 0\n"
        verdict = fresh_task.grade(inst, sb.run_python(code), code, sb)
    assert verdict.status == "invalid_task" and "repeated runs" in verdict.reason


def test_reference_output_cached_in_process_and_on_disk(fresh_task, tmp_path):
    inst = make_inst(CONTEXT, "def area(self):\n    return self.x * self.x\n")
    assert grade_code(fresh_task, inst, inst.record["solution"]).correct
    files = list((tmp_path / "c").glob("*.json"))
    assert len(files) == 1 and json.loads(files[0].read_text())["stdout"] == "9"
    # A poisoned disk entry proves later grading reads the cache instead of rerunning the reference.
    files[0].write_text(json.dumps({"stdout": "10", "reason": ""}))
    assert grade_code(fresh_task, inst, inst.record["solution"]).correct  # still the process cache
    biocoder._REFERENCE_CACHE.clear()
    assert not grade_code(fresh_task, inst, inst.record["solution"]).correct
    # Missing modules are the environment's fault: not written to disk.
    grade_code(fresh_task, make_inst(CONTEXT, "def area(self):\n    import no_such_module_xyz\n"), "x = 1")
    assert len(list((tmp_path / "c").glob("*.json"))) == 1


def test_cache_and_task_files_hidden(task):
    inst = task.load("test")[0]
    spec = task.sandbox_spec(inst)
    assert task.cache_dir() in spec.hidden_paths
    assert task.data_dir / "test_tasks.jsonl" in spec.hidden_paths


def test_sample_oracle_round_trip(task):
    instances = task.load("test")
    assert 5 <= len(instances) <= 20
    assert any(f"    {MARKER}" in i.record["context"] for i in instances)  # a method splice
    for i in instances:
        assert i.record["solution"] not in i.goal
        result, verdict = run_and_grade(task, i, task.oracle_code(i))
        assert result.ok and verdict.correct, (i.task_id, result, verdict)
        name = biocoder.function_name(i.record["signature"])
        args = i.record["signature"].split("(", 1)[1]
        _, wrong = run_and_grade(task, i, f"def {name}({args}:\n    return None\n")
        assert wrong.status == "graded" and not wrong.correct


def test_real_file_shape():
    task = real_task(BioCoder)
    instances = task.load("test")
    assert len(instances) == 157  # metadata.json says 156: the release's known off-by-one
    assert len({i.task_id for i in instances}) == 157
    problems = [marker_problem(i.record["context"], i.record["signature"]) for i in instances]
    # 12 contexts define the function again after the marker (one with the marker commented out).
    assert sum(p is not None for p in problems) == 12
    for inst, problem in zip(instances, problems, strict=True):
        if problem is None:
            ast.parse(splice(inst.record["context"], inst.record["solution"]))


@pytest.mark.slow
def test_real_references_with_bio_interpreter(tmp_path):
    """With MEDAGENTGYM_BIOCODER_PYTHON naming an interpreter that has the contexts' packages, every usable
    real reference is accepted through the splice and a stub with the right signature is not."""
    python = os.environ.get("MEDAGENTGYM_BIOCODER_PYTHON")
    if not python:
        pytest.skip("set MEDAGENTGYM_BIOCODER_PYTHON to an interpreter with pysam, scikit-image, scikit-learn")
    task = real_task(BioCoder, python=python, cache_dir=str(tmp_path))
    graded = 0
    for inst in task.load("test"):
        with create_sandbox(SANDBOX, task.sandbox_spec(inst)) as sb:
            verdict = task.grade(inst, ok(), task.oracle_code(inst), sb)
            if verdict.status == "graded":
                graded += 1
                assert verdict.correct, (inst.task_id, verdict)
                stub = inst.record["signature"].strip() + ":\n    return None\n"
                assert not task.grade(inst, ok(), stub, sb).correct, inst.task_id
    assert graded >= 100


def test_validate_code_runs_the_spliced_program(task):
    inst = task.load("test")[0]
    code = task.oracle_code(inst)
    program = task.program(inst, code)
    context = inst.record["context"]
    assert program.endswith(splice(context, code)) and MARKER not in program
    with create_sandbox(SANDBOX, task.sandbox_spec(inst)) as sb:
        result = sb.run_python(program)
        assert result.ok and result.stdout.strip()  # the context's own output, as the grader will see it
        assert task.grade(inst, result, code, sb).correct
