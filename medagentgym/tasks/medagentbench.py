"""MedAgentBench: clinical tasks against a FHIR server (look-ups, calculations, orders).

Layout (the original release's): ``{test,train}_tasks.jsonl`` (id ``taskN_M``, instruction, context, sol,
eval_MRN) and ``funcs_v1.json`` (the FHIR operations offered). The FHIR data comes from
``task.options.fhir_base_url`` (a real server, e.g. MedAgentBench's) or, when that is null, from
``fhir_resources.json`` in the data dir (the synthetic sample writes one). Either way agent code talks to
a local recording server (``fhir_server``) whose per-episode base URL is in ``$FHIR_BASE_URL``; graders
re-derive each answer from the FHIR data and compare the POSTs that episode sent.
"""

from __future__ import annotations

import datetime as dt
import json
import secrets
import threading
from pathlib import Path
from typing import Any

from medagentgym.errors import DataMissingError, TaskFileError
from medagentgym.grading.answers import submitted_answer
from medagentgym.sandbox.base import Sandbox, SandboxSpec
from medagentgym.tasks.base import Task
from medagentgym.tasks.fhir_functions import describe_functions, schema_from_fields
from medagentgym.tasks.fhir_server import (
    SEARCH_PARAMS,
    FhirServer,
    LocalStore,
    UpstreamStore,
)
from medagentgym.tasks.medagentbench_rules import (
    DEFAULT_NOW,
    NOT_FOUND,
    POST_FIELDS,
    InvalidInstance,
    check_answer,
    check_posts,
    expected,
    task_type,
)
from medagentgym.types import ExecResult, TaskInstance, Verdict

RESOURCES_FILE = "fhir_resources.json"
FUNCS_FILE = "funcs_v1.json"


_NOW = f"It's {DEFAULT_NOW} now."
_LAB = _NOW + ' The code for {} is "{}".'
_MG_RULES = (" The NDC for IV magnesium is 0338-1715-40. Dosing: 1.5 to 1.9 mg/dL: 1 g over 1 hour; 1 to <1.5: "
             "2 g over 2 hours; <1: 4 g over 4 hours.")
_K_RULES = (" The NDC for oral potassium is 40032-917-01: 10 mEq per 0.1 mmol/L below the goal of 3.5. The LOINC "
            "code for serum potassium is 2823-3.")
_NOTE = ("Situation: right ankle swelling after a fall. Background: X-ray shows no fracture. Assessment: suspected "
         "ligament sprain. Recommendation: orthopedic review for management.")
# The sample's own wording per task type: (instruction template, context).
SAMPLE_TEMPLATES: dict[str, tuple[str, str]] = {
    "task1": ((f'Find the MRN of the patient named {{name}} born {{born}}. If there is no such patient, answer '
              f'"{NOT_FOUND}".'), ""),
    "task2": ("How old is the patient with MRN {mrn}?", f"{_NOW} Round the age down to an integer."),
    "task3": ('Record a blood pressure of "124/81 mmHg" just measured for the patient with MRN {mrn}.',
              f"{_NOW} The flowsheet ID for blood pressure is BP."),
    "task4": ("What is the latest magnesium of patient {mrn} in the last 24 hours?",
              _LAB.format("magnesium", "MG") + " Answer in mg/dL, or -1 if there is none."),
    "task5": (("Check the last magnesium of patient {mrn} within 24 hours and, if low, order IV magnesium "
              "replacement per the dosing rules. Order nothing if there is no recent value."),
              _LAB.format("magnesium", "MG") + _MG_RULES),
    "task6": ("What is the mean blood glucose (CBG) of patient {mrn} over the last 24 hours?",
              _LAB.format("CBG", "GLU") + " Answer in mg/dL, or -1 if there is none."),
    "task7": ("What is the most recent CBG of patient {mrn}?", _LAB.format("CBG", "GLU")),
    "task8": (f'Order an orthopedic surgery referral for patient {{mrn}} with the free text "{_NOTE}"',
              f"{_NOW} The SNOMED code for orthopedic surgery referral is 306181000000106."),
    "task9": (("Check the most recent potassium of patient {mrn}. If low, order potassium replacement per the "
              "dosing rule and a serum potassium test for 8am tomorrow."), _LAB.format("potassium", "K") + _K_RULES),
    "task10": (("What is the last HbA1C of patient {mrn} and when was it recorded? If it is more than a year old, "
               "order a new HbA1C test."),
               _LAB.format("HbA1C", "A1C") + " The LOINC code for ordering HbA1C is 4548-4. Answer [-1] if none."),
}
# (id, eval_MRN, template fields, sol): cases on both sides of every decision the graders make.
SAMPLE_ROWS: list[tuple[str, str, dict[str, str], list[str] | None]] = [
    ("task1_1", "S1000001", {"name": "Ada Quint", "born": "1951-04-12"}, ["S1000001"]),
    ("task1_2", "S0000000", {"name": "Zed Nobody", "born": "1900-01-01"}, [NOT_FOUND]),
    ("task2_1", "S1000002", {}, None), ("task3_1", "S1000003", {}, None), ("task4_1", "S1000004", {}, None),
    ("task4_2", "S1000005", {}, None), ("task5_1", "S1000006", {}, None), ("task5_2", "S1000007", {}, None),
    ("task6_1", "S1000008", {}, None), ("task7_1", "S1000008", {}, None), ("task8_1", "S1000003", {}, None),
    ("task9_1", "S1000009", {}, None), ("task9_2", "S1000010", {}, None), ("task10_1", "S1000002", {}, None),
    ("task10_2", "S1000004", {}, None),
]


class MedAgentBench(Task):
    name = "medagentbench"
    public_files = (FUNCS_FILE,)

    def __init__(self, cfg, data_dir: Path):
        super().__init__(cfg, data_dir)
        self._server: FhirServer | None = None
        self._lock = threading.Lock()

    # ---- data -------------------------------------------------------------------------------------
    def required_files(self, split: str) -> list[str]:
        local = [] if self.options.get("fhir_base_url") else [RESOURCES_FILE]
        return super().required_files(split) + local

    def how_to_obtain(self) -> str:
        return (
            "The task files and funcs_v1.json come with the MedAgentGym release. The FHIR data is served by the "
            "MedAgentBench FHIR server (its docker image from the MedAgentBench release): start it and set "
            "task.options.fhir_base_url=http://localhost:8080/fhir/, or put a fhir_resources.json (a JSON list "
            "of FHIR resources) in the data dir."
        )

    def make_instance(self, split: str, index: int, record: dict[str, Any]) -> TaskInstance:
        rid, instruction = record.get("id"), record.get("instruction")
        if not isinstance(rid, str) or not rid.startswith("task") or not isinstance(instruction, str):
            raise TaskFileError(
                f"medagentbench task file row {index} needs an id like 'task3_1' and an instruction; use the "
                "original release's task files."
            )
        context = (record.get("context") or "").strip()
        goal = (
            f"{instruction.strip()}\n{context}\n\nThe FHIR server's base URL is in the environment variable "
            "FHIR_BASE_URL (it ends with /fhir/)."
        ).replace("\n\n\n", "\n\n")
        return TaskInstance(self.name, split, index, rid, goal, {"task_type": task_type(record)}, record)

    def instruction(self) -> str:
        return (
            "You help clinicians by working with an electronic health record through its FHIR R4 API. Write "
            "Python that calls the server (read the base URL from os.environ['FHIR_BASE_URL']; urllib.request "
            "works; ask for JSON with the parameter _format=json). Search results are Bundles whose `entry` "
            "items hold the resources. Operations offered:\n"
            f"{self._operations()}\n"
            "Answer rules: for a question, set `answer` to the value asked for (a number for measurements and "
            "ages, the MRN string for a patient look-up, and for a question about a lab value and when it was "
            "recorded the list [value, \"recorded date-time\"]; use -1, [-1] or \"Patient not found\" as the "
            "task says when nothing is available). To record or order something, POST the resource as JSON to "
            "FHIR_BASE_URL + the resource type; the POSTs your code sends are what is graded, so send exactly "
            "the ones the task needs, once. When a task asks you to check a lab value and order only if it is "
            "low, set `answer` to the value you checked (-1 if none)."
        )

    def _operations(self) -> str:
        try:
            return describe_functions(json.loads((self.data_dir / FUNCS_FILE).read_text(encoding="utf-8")))
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return "\n".join(f"- GET $FHIR_BASE_URL/{t} (search: {', '.join(p)})" for t, p in SEARCH_PARAMS.items())

    # ---- episode ----------------------------------------------------------------------------------
    def server(self) -> FhirServer:
        with self._lock:
            if self._server is None:
                url = self.options.get("fhir_base_url")
                if url:
                    store = UpstreamStore(str(url))
                else:
                    if not (self.data_dir / RESOURCES_FILE).is_file():
                        raise DataMissingError(self.name, self.data_dir, [RESOURCES_FILE], self.how_to_obtain())
                    store = LocalStore(json.loads((self.data_dir / RESOURCES_FILE).read_text(encoding="utf-8")))
                self._server = FhirServer(store)
            return self._server

    def close(self) -> None:
        with self._lock:
            if self._server is not None:
                self._server.close()
                self._server = None

    def sandbox_spec(self, inst: TaskInstance) -> SandboxSpec:
        server = self.server()
        # A fresh episode name per sandbox keeps concurrent episodes (and rollouts) apart.
        url = server.base_url(secrets.token_hex(8))
        hidden = [self.data_dir / f for f in {*self.split_files.values(), RESOURCES_FILE}]
        return SandboxSpec(
            readonly_paths=[self.data_dir / f for f in self.public_files],
            hidden_paths=hidden,
            env={"FHIR_BASE_URL": url},
            allow_hosts=[f"127.0.0.1:{server.port}"],
        )

    def _episode(self, sandbox: Sandbox) -> str:
        """The episode name, read back from the sandbox's own environment (so any backend works)."""
        res = sandbox.run_shell('printf %s "$FHIR_BASE_URL"', timeout=30)
        parts = res.stdout.strip().rstrip("/").split("/")
        if not res.ok or len(parts) < 2 or parts[-1] != "fhir":
            raise OSError(f"the sandbox has no FHIR_BASE_URL ({res.status}: {res.stderr.strip()[:200]})")
        return parts[-2]

    def setup_episode(self, inst: TaskInstance, sandbox: Sandbox) -> None:
        self.server().reset(self._episode(sandbox))

    def grade(self, inst: TaskInstance, result: ExecResult, code: str, sandbox: Sandbox) -> Verdict:
        if not result.ok:
            return Verdict(False, 0.0, "the code did not run to completion")
        try:
            exp = expected(inst.record, self.server().store)
            posted = self.server().posts(self._episode(sandbox))
        except InvalidInstance as exc:
            return Verdict(False, 0.0, str(exc), status="invalid_task")
        except (OSError, ValueError, KeyError) as exc:
            return Verdict(False, 0.0, f"grading failed: {exc}", status="grader_error")
        problem = check_answer(exp, submitted_answer(result)) or check_posts(exp.posts, posted)
        if problem:
            return Verdict(False, 0.0, problem)
        return Verdict(True, 1.0, "the answer and the requests sent are correct")

    def oracle_code(self, inst: TaskInstance) -> str:
        try:
            exp = expected(inst.record, self.server().store)
        except InvalidInstance:
            return "answer = None  # the row's own gold is unusable; the grader reports invalid_task\n"
        return f"""import json
import os
import urllib.request

BASE = os.environ["FHIR_BASE_URL"]
for resource_type, payload in json.loads({json.dumps(exp.posts)!r}):
    request = urllib.request.Request(BASE + resource_type, data=json.dumps(payload).encode(), method="POST",
                                     headers={{"Content-Type": "application/fhir+json"}})
    with urllib.request.urlopen(request, timeout=30) as response:
        response.read()
answer = {exp.answer!r}
"""

    # ---- sample ------------------------------------------------------------------------------------
    @classmethod
    def make_sample(cls, out_dir: Path) -> None:
        now = dt.datetime.fromisoformat(DEFAULT_NOW)
        people = [
            ("S1000001", "Ada", "Quint", "1951-04-12", "female"), ("S1000002", "Bram", "Osei", "1968-11-14", "male"),
            ("S1000003", "Cleo", "Varga", "1980-02-29", "female"), ("S1000004", "Dev", "Rana", "1945-07-01", "male"),
            ("S1000005", "Edda", "Lund", "1972-12-24", "female"), ("S1000006", "Femi", "Adeyemi", "1959-03-08", "male"),
            ("S1000007", "Gita", "Shah", "1990-09-30", "female"), ("S1000008", "Hugo", "Brandt", "1938-05-17", "male"),
            ("S1000009", "Iris", "Moreau", "1963-01-21", "female"), ("S1000010", "Jon", "Ikeda", "2001-06-05", "male"),
        ]
        resources: list[dict[str, Any]] = [
            {"resourceType": "Patient", "id": mrn, "identifier": [{"system": "urn:sample:mrn", "value": mrn}],
             "name": [{"use": "official", "family": family, "given": [given]}], "birthDate": born, "gender": sex}
            for mrn, given, family, born, sex in people
        ]
        labs = [  # (patient, code, unit, value, hours before now)
            ("S1000004", "MG", "mg/dL", 1.6, 30), ("S1000004", "MG", "mg/dL", 2.1, 3), ("S1000005", "MG", "mg/dL", 1.2, 50),
            ("S1000006", "MG", "mg/dL", 1.3, 5), ("S1000007", "MG", "mg/dL", 2.2, 2), ("S1000008", "GLU", "mg/dL", 300, 40),
            ("S1000008", "GLU", "mg/dL", 110, 20), ("S1000008", "GLU", "mg/dL", 150, 10), ("S1000008", "GLU", "mg/dL", 95, 1),
            ("S1000009", "K", "mmol/L", 3.9, 1000), ("S1000009", "K", "mmol/L", 3.1, 6), ("S1000010", "K", "mmol/L", 4.2, 12),
            ("S1000002", "A1C", "%", 7.2, 24 * 830), ("S1000004", "A1C", "%", 6.4, 24 * 500), ("S1000004", "A1C", "%", 6.1, 24 * 146),
            ("S1000006", "GLU", "mg/dL", 130, 4), ("S1000007", "K", "mmol/L", 3.0, 8),
        ]
        for i, (mrn, code, unit, value, hours) in enumerate(labs, 1):
            when = (now - dt.timedelta(hours=hours)).isoformat()
            resources.append({
                "resourceType": "Observation", "id": f"obs-{i}", "status": "final",
                "category": [{"coding": [{"system": "urn:sample:category", "code": "laboratory"}]}],
                "code": {"coding": [{"system": "urn:sample:lab", "code": code}], "text": code},
                "subject": {"reference": f"Patient/{mrn}"}, "effectiveDateTime": when, "issued": when,
                "valueQuantity": {"value": value, "unit": unit},
            })
        records = [
            {"id": rid, "instruction": SAMPLE_TEMPLATES[rid.split("_")[0]][0].format(mrn=mrn, **extra),
             "context": SAMPLE_TEMPLATES[rid.split("_")[0]][1], "sol": sol, "eval_MRN": mrn}
            for rid, mrn, extra, sol in SAMPLE_ROWS
        ]
        funcs = [
            {"name": f"GET {{api_base}}/{t}", "description": f"Search {t} resources.",
             "parameters": {"type": "object", "properties": {p: {"type": "string"} for p in params}}}
            for t, params in SEARCH_PARAMS.items()
        ] + [
            {"name": f"POST {{api_base}}/{t}", "description": f"Create a {t}.", "parameters": schema_from_fields(fields)}
            for t, fields in POST_FIELDS.items()
        ]
        (out_dir / RESOURCES_FILE).write_text(json.dumps(resources, indent=1), encoding="utf-8")
        (out_dir / FUNCS_FILE).write_text(json.dumps(funcs, indent=1), encoding="utf-8")
        for split, chosen in (("test", records), ("train", records[::2])):
            text = "".join(json.dumps(r) + "\n" for r in chosen)
            (out_dir / cls.split_files[split]).write_text(text, encoding="utf-8")
