"""MedAgentBench: the FHIR server, per-type grader golden cases, sample oracle, proxy mode, real-file conformance."""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request

import pytest

from medagentgym.config import SandboxConfig
from medagentgym.errors import DataMissingError
from medagentgym.grading.answers import NO_ANSWER
from medagentgym.sandbox import create_sandbox
from medagentgym.tasks.fhir_functions import flatten
from medagentgym.tasks.fhir_server import FhirServer, LocalStore, UpstreamStore
from medagentgym.tasks.medagentbench import RESOURCES_FILE, MedAgentBench
from medagentgym.tasks.medagentbench_rules import POST_FIELDS, check_answer, expected
from tests.tasks.roundtrip import TRACEBACK, ok, real_task, sample_task

# Grading needs no numpy/pandas in the sandbox; without the preload a sandbox starts in a fraction of a second.
FAST = SandboxConfig(preload=[])


@pytest.fixture(scope="module")
def task(tmp_path_factory):
    t = sample_task(MedAgentBench, tmp_path_factory.mktemp("medagentbench"))
    yield t
    t.close()


@pytest.fixture(scope="module")
def by_id(task):
    return {i.task_id: i for i in task.load("test")}


def _get(url: str) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def _post(url: str, body) -> int:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST")
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status
    except urllib.error.HTTPError as exc:
        return exc.code


class Episode:
    """One sandbox for an instance; each attempt resets the episode's server state first (setup_episode),
    sends ``posts`` from the host to the episode's own base URL as the agent's code would, then grades."""

    def __init__(self, task, inst):
        self.task, self.inst = task, inst
        self.sb = create_sandbox(FAST, task.sandbox_spec(inst))
        self.base = self.sb.run_shell('printf %s "$FHIR_BASE_URL"').stdout

    def attempt(self, posts=(), result=None, code: str = ""):
        self.task.setup_episode(self.inst, self.sb)
        for rtype, body in posts:
            _post(self.base + rtype, body)
        res = self.sb.run_python(code) if code else result
        return res, self.task.grade(self.inst, res, code, self.sb)

    def correct(self, posts=(), result=None) -> bool:
        return self.attempt(posts, result)[1].correct

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.sb.close()


# ---- the server --------------------------------------------------------------------------------------
def test_server_search_semantics(task):
    url = task.server().base_url("probe")
    status, b = _get(url + "Observation?patient=S1000008&code=GLU&date=ge2023-11-12T10:15:00%2B00:00&_format=json")
    assert status == 200 and b["resourceType"] == "Bundle" and b["total"] == 3
    assert {e["resource"]["valueQuantity"]["value"] for e in b["entry"]} == {110, 150, 95}
    assert _get(url + "Observation?patient=Patient/S1000008&code=GLU")[1]["total"] == 4
    status, b = _get(url + "Patient?given=ada&family=QUI&birthdate=1951-04-12")
    assert [e["resource"]["id"] for e in b["entry"]] == ["S1000001"]
    assert _get(url + "Patient?identifier=S1000002")[1]["entry"][0]["resource"]["birthDate"] == "1968-11-14"
    assert _get(url + "Patient?family=Nobody")[1]["total"] == 0
    status, b = _get(url + "Observation?colour=red")
    assert status == 400 and "colour" in b["issue"][0]["diagnostics"]
    assert _get(url + "metadata")[1]["resourceType"] == "CapabilityStatement"


def test_posts_are_recorded_per_episode_and_reset(task):
    server = task.server()
    a, b = server.base_url("episodea"), server.base_url("episodeb")
    body = {"resourceType": "Observation", "subject": {"reference": "Patient/S1000001"}, "code": {"text": "BP"},
            "effectiveDateTime": "2023-11-13T10:15:00+00:00"}
    assert _post(a + "Observation", body) == 201
    assert _post(a + "Observation", "not an object") == 400
    assert [t for t, _ in server.posts("episodea")] == ["Observation", "Observation"] and server.posts("episodeb") == []
    # A created resource is visible to its own episode's searches only.
    assert _get(a + "Observation?patient=S1000001&code=BP")[1]["total"] == 1
    assert _get(b + "Observation?patient=S1000001&code=BP")[1]["total"] == 0
    server.reset("episodea")
    assert server.posts("episodea") == [] and _get(a + "Observation?patient=S1000001&code=BP")[1]["total"] == 0


# ---- oracle and golden cases -------------------------------------------------------------------------
def test_oracle_round_trip_on_sample(task, by_id):
    assert len(by_id) == 15 and {i.split("_")[0] for i in by_id} == {f"task{n}" for n in range(1, 11)}
    for inst in by_id.values():
        with Episode(task, inst) as ep:
            res, verdict = ep.attempt(code=task.oracle_code(inst))
        assert res.ok, res.stderr
        assert verdict.correct, (inst.task_id, verdict)


QUESTIONS = {  # id -> the right answer, derived by hand from the sample data
    "task1_1": "S1000001", "task1_2": "Patient not found", "task2_1": 54, "task4_1": 2.1, "task4_2": -1,
    "task6_1": (110 + 150 + 95) / 3, "task7_1": 95, "task5_2": 2.2, "task9_2": 4.2,
}


@pytest.mark.parametrize("tid", sorted(QUESTIONS))
def test_question_answers(task, by_id, tid):
    gold = QUESTIONS[tid]
    near_miss = gold + "0" if isinstance(gold, str) else gold + 1
    with Episode(task, by_id[tid]) as ep:
        assert ep.correct(result=ok(answer=repr(gold)))
        assert ep.correct(result=ok(answer=repr([gold])))  # the original's list form
        assert ep.correct(result=ok(stdout=f"{gold}\n"))
        for wrong in ("0", "1", "True", "''", "None", repr([gold, 0, 1, -1, "S1000002"]), repr(near_miss)):
            assert not ep.correct(result=ok(answer=wrong)), wrong
        assert not ep.correct(result=ok(stdout=""))
        assert not ep.correct(result=TRACEBACK)


def test_average_tolerates_rounding(task, by_id):
    with Episode(task, by_id["task6_1"]) as ep:
        assert ep.correct(result=ok(answer="118.3"))
        assert not ep.correct(result=ok(answer="118.5"))


def test_a_question_with_an_order_fails(task, by_id):
    order = ("ServiceRequest", {"resourceType": "ServiceRequest", "subject": {"reference": "Patient/S1000004"}})
    with Episode(task, by_id["task4_1"]) as ep:
        assert ep.correct(result=ok(answer="2.1"))
        assert not ep.correct(posts=[order], result=ok(answer="2.1"))


BP = {
    "resourceType": "Observation",
    "category": [{"coding": [{"system": "http://hl7.org/fhir/observation-category", "code": "vital-signs"}]}],
    "code": {"text": "BP"}, "effectiveDateTime": "2023-11-13T10:15:00Z", "status": "final",
    "valueString": "124/81 mmHg", "subject": {"reference": "Patient/S1000003"},
}


def test_task3_record_uses_the_rows_own_patient(task, by_id):
    with Episode(task, by_id["task3_1"]) as ep:
        assert ep.correct(posts=[("Observation", BP)], result=ok())
        other = {**BP, "subject": {"reference": "Patient/S2380121"}}  # the patient the original hard-coded
        assert not ep.correct(posts=[("Observation", other)], result=ok())
        for change in ({"valueString": "118/77 mmHg"}, {"status": "preliminary"}, {"code": {"text": "HR"}},
                       {"effectiveDateTime": "2023-11-13T11:15:00+00:00"}):
            assert not ep.correct(posts=[("Observation", {**BP, **change})], result=ok()), change
        assert "expected 1 POST" in ep.attempt(posts=[("Observation", BP)] * 2, result=ok())[1].reason
        assert not ep.correct(result=ok(answer="'done'"))
        assert not ep.correct(posts=[("Observation", BP)], result=TRACEBACK)


MG_ORDER = {
    "resourceType": "MedicationRequest",
    "medicationCodeableConcept": {"coding": [{"system": "http://hl7.org/fhir/sid/ndc", "code": "0338-1715-40",
                                              "display": "magnesium sulfate"}], "text": "Mg IV"},
    "authoredOn": "2023-11-13T10:15:00+00:00",
    "dosageInstruction": {"route": {"text": "IV"},
                          "doseAndRate": {"doseQuantity": {"value": 2.0, "unit": "g"},
                                          "rateQuantity": {"value": 2, "unit": "h"}}},
    "status": "active", "intent": "order", "subject": {"reference": "S1000006"},
}


def test_task5_order_checked_field_by_field(task, by_id):
    order = [("MedicationRequest", MG_ORDER)]
    with Episode(task, by_id["task5_1"]) as ep:
        assert ep.correct(posts=order, result=ok(answer="1.3"))
        assert not ep.correct(posts=order, result=ok(answer="2.1"))  # the checked value is part of the answer
        wrong_dose = {**MG_ORDER, "dosageInstruction": [{"route": {"text": "IV"}, "doseAndRate": [
            {"doseQuantity": {"value": 1, "unit": "g"}, "rateQuantity": {"value": 1, "unit": "h"}}]}]}
        for body in (wrong_dose, {**MG_ORDER, "intent": "plan"},
                     {**MG_ORDER, "medicationCodeableConcept": {"coding": [{"code": "0338-1715-40"}]}}):
            assert not ep.correct(posts=[("MedicationRequest", body)], result=ok(answer="1.3"))
        assert not ep.correct(result=ok(answer="1.3"))  # low, so an order is needed
    with Episode(task, by_id["task5_2"]) as ep:  # a normal value: nothing may be ordered
        assert not ep.correct(posts=order, result=ok(answer="2.2"))


def test_task8_referral_note_must_match(task, by_id):
    inst = by_id["task8_1"]
    (_, body), = expected(inst.record, task.server().store).posts
    spaced = {**body, "note": [{"text": "  " + body["note"]["text"].replace(" ", "  ") + " "}],
              "authoredOn": "2023-11-13T10:15:00"}
    with Episode(task, inst) as ep:
        assert ep.correct(posts=[("ServiceRequest", spaced)], result=ok())
        for change in ({"note": {"text": "see chart"}}, {"priority": "routine"},
                       {"code": {"coding": [{"system": "http://loinc.org", "code": "306181000000106"}]}}):
            assert not ep.correct(posts=[("ServiceRequest", {**body, **change})], result=ok()), change


def test_task9_needs_both_orders(task, by_id):
    inst = by_id["task9_1"]
    med, lab = expected(inst.record, task.server().store).posts
    assert med[1]["dosageInstruction"][0]["doseAndRate"][0]["doseQuantity"]["value"] == pytest.approx(40)
    late = (lab[0], {**lab[1], "occurrenceDateTime": "2023-11-14T09:00:00+00:00"})
    with Episode(task, inst) as ep:
        assert ep.correct(posts=[lab, med], result=ok(answer="3.1"))
        assert not ep.correct(posts=[med], result=ok(answer="3.1"))
        assert not ep.correct(posts=[med, late], result=ok(answer="3.1"))


def test_task10_is_winnable_and_strict(task, by_id):
    stale, fresh = by_id["task10_1"], by_id["task10_2"]
    exp = expected(stale.record, task.server().store)
    (order,), (value, when) = exp.posts, exp.answer
    assert value == 7.2
    with Episode(task, stale) as ep:
        assert ep.correct(posts=[order], result=ok(answer=repr([7.2, when])))
        assert not ep.correct(result=ok(answer=repr([7.2, when])))  # the order is missing
        assert not ep.correct(posts=[order], result=ok(answer="7.2"))  # the date is missing
    fresh_answer = expected(fresh.record, task.server().store).answer
    assert fresh_answer[0] == 6.1
    with Episode(task, fresh) as ep:
        assert ep.correct(result=ok(answer=repr(fresh_answer)))
        assert not ep.correct(posts=[order], result=ok(answer=repr(fresh_answer)))
        assert not ep.correct(result=ok(answer=repr([6.4, fresh_answer[1]])))


def test_proxy_mode_against_an_upstream_fhir_server(task, by_id):
    """With fhir_base_url set, searches go to the upstream server and POSTs stay local to the episode."""
    resources = json.loads((task.data_dir / RESOURCES_FILE).read_text())
    upstream = FhirServer(LocalStore(resources))
    proxied = sample_task(MedAgentBench, task.data_dir.parent, fhir_base_url=upstream.base_url("real"))
    try:
        instances = {i.task_id: i for i in proxied.load("test")}
        for tid in ("task2_1", "task6_1", "task9_1", "task10_1"):
            with Episode(proxied, instances[tid]) as ep:
                res, verdict = ep.attempt(code=proxied.oracle_code(instances[tid]))
            assert verdict.correct, (tid, verdict, res.stderr)
        assert upstream.posts("real") == []
    finally:
        proxied.close()
        upstream.close()


def test_sandbox_spec_reaches_only_the_server_and_hides_gold(task, by_id):
    spec = task.sandbox_spec(by_id["task1_1"])
    port = task.server().port
    assert spec.allow_hosts == [f"127.0.0.1:{port}"]
    assert re.fullmatch(rf"http://127\.0\.0\.1:{port}/[0-9a-f]{{16}}/fhir/", spec.env["FHIR_BASE_URL"])
    assert {p.name for p in spec.hidden_paths} >= {"test_tasks.jsonl", "train_tasks.jsonl", RESOURCES_FILE}
    assert task.sandbox_spec(by_id["task1_1"]).env["FHIR_BASE_URL"] != spec.env["FHIR_BASE_URL"]
    assert "sol" not in by_id["task1_1"].goal and "S1000001" not in by_id["task1_1"].goal


def test_missing_fhir_data_is_a_clear_error(task, tmp_path):
    for name in ("test_tasks.jsonl", "funcs_v1.json"):
        (tmp_path / name).write_text((task.data_dir / name).read_text())
    bare = MedAgentBench(task.cfg, tmp_path)
    with pytest.raises(DataMissingError) as err:
        bare.load("test")
    assert RESOURCES_FILE in str(err.value) and "fhir_base_url" in str(err.value)


# ---- the real task files -----------------------------------------------------------------------------
def test_real_task_file_conformance():
    real = real_task(MedAgentBench, fhir_base_url="http://127.0.0.1:9/fhir/")
    for split, n in (("test", 60), ("train", 240)):
        rows = real.read_records(split)
        assert len(rows) == n
        instances = [real.make_instance(split, i, r) for i, r in enumerate(rows)]
        kinds = [i.context["task_type"] for i in instances]
        assert {k: kinds.count(k) for k in set(kinds)} == {f"task{k}": n // 10 for k in range(1, 11)}
        for rec in rows:
            kind, mrn = rec["id"].split("_")[0], rec["eval_MRN"]
            if kind == "task1":
                # Self-contained: the gold MRN is in the row, so the grader is checked on every real row.
                exp = expected(rec, None)
                assert check_answer(exp, rec["sol"][0]) is None and check_answer(exp, rec["sol"]) is None
                for trivial in ("0", "1", True, "", NO_ANSWER, list({r["eval_MRN"] for r in rows})):
                    assert check_answer(exp, trivial) is not None
            elif kind in ("task3", "task8"):
                # Parameters the graders read from the row itself (task3: its own patient, not a fixed one).
                (_, body), = expected(rec, None).posts
                assert body["subject"]["reference"] == f"Patient/{mrn}" and mrn in rec["instruction"]
            else:
                assert mrn in rec["instruction"] and "2023-11-13T10:15:00+00:00" in rec["context"]
    assert "GET $FHIR_BASE_URL/Observation" in real.instruction()


def test_unusable_rows_are_invalid_and_an_unreachable_server_is_a_grader_error(task, tmp_path):
    broken = task.make_instance("test", 99, {"id": "task3_9", "instruction": "Record a BP for S1000003.",
                                             "context": "", "sol": None, "eval_MRN": "S1000003"})
    with Episode(task, broken) as ep:
        res, verdict = ep.attempt(code=task.oracle_code(broken))
    assert res.ok and verdict.status == "invalid_task" and not verdict.correct
    dead = sample_task(MedAgentBench, task.data_dir.parent, fhir_base_url="http://127.0.0.1:9/fhir/")
    try:
        inst = dead.load("test")[2]  # task2_1: needs the patient's birth date from the server
        with Episode(dead, inst) as ep:
            verdict = ep.attempt(result=ok(answer="54"))[1]
        assert verdict.status == "grader_error" and not verdict.correct
    finally:
        dead.close()


def test_proxy_reports_an_unreachable_upstream():
    proxy = FhirServer(UpstreamStore("http://127.0.0.1:9/fhir/", timeout=5))
    try:
        status, body = _get(proxy.base_url("e") + "Patient?identifier=S1")
        assert status == 502 and "unreachable" in body["issue"][0]["diagnostics"]
    finally:
        proxy.close()


def test_sample_functions_file_describes_every_graded_post_field(task):
    funcs = {f["name"]: f for f in json.loads((task.data_dir / "funcs_v1.json").read_text())}
    for rtype, fields in POST_FIELDS.items():
        assert flatten(funcs[f"POST {{api_base}}/{rtype}"]["parameters"]) == list(fields.items())
    assert 'status: Use "final"' in task.instruction() and "priority: Use \"stat\"" in task.instruction()
