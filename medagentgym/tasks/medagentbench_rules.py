"""What each MedAgentBench task type expects, re-derived from the FHIR data at grading time.

``expected(record, store)`` gives the answer a question type needs and the exact POSTs an order type needs
(canonical payloads: the oracle sends them, the grader compares the agent's POSTs to them field by field).
Every type expects exactly its POSTs: a query that also places an order, or an order placed twice, fails.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field
from typing import Any

from medagentgym.grading.answers import NO_ANSWER, numbers_equal, to_number
from medagentgym.tasks.fhir_server import Store, codes, parse_instant

DEFAULT_NOW = "2023-11-13T10:15:00+00:00"
NDC, LOINC, SNOMED = "http://hl7.org/fhir/sid/ndc", "http://loinc.org", "http://snomed.info/sct"
VITALS = "http://hl7.org/fhir/observation-category"
NOT_FOUND = "Patient not found"


# The POST fields the graders compare, as the sample's funcs_v1.json describes them to the agent.
POST_FIELDS: dict[str, dict[str, str]] = {
    "Observation": {
        "resourceType": 'Always "Observation".',
        "category[].coding[].system": f'Use "{VITALS}".',
        "category[].coding[].code": 'Use "vital-signs".',
        "category[].coding[].display": 'Use "Vital Signs".',
        "code.text": "The flowsheet ID of what was measured.",
        "effectiveDateTime": "When it was measured (ISO 8601).",
        "status": 'Use "final".',
        "valueString": "The measured value with its unit.",
        "subject.reference": '"Patient/<MRN>".',
    },
    "MedicationRequest": {
        "resourceType": 'Always "MedicationRequest".',
        "medicationCodeableConcept.coding[].system": f'Use "{NDC}".',
        "medicationCodeableConcept.coding[].code": "The NDC of the medication.",
        "authoredOn": "When the order is written (ISO 8601).",
        "dosageInstruction[].route.text": "The route, e.g. IV or oral.",
        "dosageInstruction[].doseAndRate[].doseQuantity.value": "The dose (a number).",
        "dosageInstruction[].doseAndRate[].doseQuantity.unit": 'Its unit, e.g. "g" or "mEq".',
        "dosageInstruction[].doseAndRate[].rateQuantity.value": "For an infusion: its duration (a number).",
        "dosageInstruction[].doseAndRate[].rateQuantity.unit": 'Its unit, e.g. "h".',
        "status": 'Use "active".',
        "intent": 'Use "order".',
        "subject.reference": '"Patient/<MRN>".',
    },
    "ServiceRequest": {
        "resourceType": 'Always "ServiceRequest".',
        "code.coding[].system": f'The code system, e.g. "{LOINC}" or "{SNOMED}".',
        "code.coding[].code": "The code of the service.",
        "authoredOn": "When the order is signed (ISO 8601).",
        "status": 'Use "active".',
        "intent": 'Use "order".',
        "priority": 'Use "stat".',
        "subject.reference": '"Patient/<MRN>".',
        "note.text": "Free-text comment, when there is one.",
        "occurrenceDateTime": "When the service should happen (ISO 8601), when specified.",
    },
}


class InvalidInstance(ValueError):
    """The row's own gold or parameters are unusable (the instance is excluded, not failed)."""


@dataclass
class Expected:
    answer: Any = None
    # How the answer is compared: none (not graded), text, number, number_0.1, value_time.
    kind: str = "none"
    posts: list[tuple[str, dict[str, Any]]] = field(default_factory=list)


def task_type(record: dict[str, Any]) -> str:
    return str(record.get("id", "")).split("_")[0]


def now_of(record: dict[str, Any]) -> dt.datetime:
    m = re.search(r"It's (\S+) now", str(record.get("context") or ""))
    value = parse_instant(m.group(1).rstrip(",.")) if m else None
    return value or parse_instant(DEFAULT_NOW)  # type: ignore[return-value]


def _labs(store: Store, mrn: str, code: str) -> list[tuple[dt.datetime, float, str]]:
    """(time, value, time as written) of the patient's observations with this code, oldest first."""
    out = []
    for r in store.search("Observation", {"patient": [mrn], "code": [code]}):
        when, value = parse_instant(r.get("effectiveDateTime")), (r.get("valueQuantity") or {}).get("value")
        if when is not None and to_number(value) is not None:
            out.append((when, float(value), r["effectiveDateTime"]))
    return sorted(out)


def _latest(labs: list, since: dt.datetime | None = None):
    recent = [x for x in labs if since is None or x[0] >= since]
    return recent[-1] if recent else None


def _subject(mrn: str) -> dict[str, str]:
    return {"reference": f"Patient/{mrn}"}


def _service_request(mrn: str, now: str, system: str, code: str, **extra: Any) -> tuple[str, dict[str, Any]]:
    return "ServiceRequest", {
        "resourceType": "ServiceRequest", "code": {"coding": [{"system": system, "code": code}]},
        "authoredOn": now, "status": "active", "intent": "order", "priority": "stat",
        "subject": _subject(mrn), **extra,
    }


def _medication_request(mrn: str, now: str, ndc: str, route: str, dose: dict, rate: dict | None = None):
    dose_and_rate = {"doseQuantity": dose, **({"rateQuantity": rate} if rate else {})}
    return "MedicationRequest", {
        "resourceType": "MedicationRequest", "medicationCodeableConcept": {"coding": [{"system": NDC, "code": ndc}]},
        "authoredOn": now, "dosageInstruction": [{"route": {"text": route}, "doseAndRate": [dose_and_rate]}],
        "status": "active", "intent": "order", "subject": _subject(mrn),
    }


def _quoted(record: dict[str, Any], pattern: str) -> str:
    m = re.search(pattern, str(record.get("instruction", "")), re.DOTALL)
    if not m:
        raise InvalidInstance(f"the instruction of {record.get('id')} lacks the quoted value the task needs")
    return m.group(1)


def expected(record: dict[str, Any], store: Store) -> Expected:
    kind, mrn = task_type(record), str(record.get("eval_MRN") or "")
    now = now_of(record)
    stamp = now.isoformat()
    if kind == "task1":
        sol = record.get("sol")
        if not isinstance(sol, list) or not sol or not isinstance(sol[0], str):
            raise InvalidInstance(f"{record.get('id')} has no gold MRN in sol")
        return Expected(sol[0], "text")
    if not mrn:
        raise InvalidInstance(f"{record.get('id')} has no eval_MRN")
    if kind == "task2":
        patients = store.search("Patient", {"identifier": [mrn]})
        born = parse_instant(patients[0].get("birthDate")) if patients else None
        if born is None:
            raise InvalidInstance(f"patient {mrn} or their birth date is not on the FHIR server")
        age = now.year - born.year - ((now.month, now.day) < (born.month, born.day))
        return Expected(age, "number")
    if kind == "task3":
        bp = _quoted(record, r'"(\d+/\d+\s*mmHg)"')
        return Expected(posts=[("Observation", {
            "resourceType": "Observation",
            "category": [{"coding": [{"system": VITALS, "code": "vital-signs", "display": "Vital Signs"}]}],
            "code": {"text": "BP"}, "effectiveDateTime": stamp, "status": "final", "valueString": bp,
            "subject": _subject(mrn)})])
    if kind in ("task4", "task5"):
        last = _latest(_labs(store, mrn, "MG"), since=now - dt.timedelta(hours=24))
        value = last[1] if last else -1
        if kind == "task4" or last is None or value > 1.9:
            return Expected(value, "number")
        grams = 4 if value < 1 else 2 if value < 1.5 else 1
        order = _medication_request(mrn, stamp, "0338-1715-40", "IV", {"value": grams, "unit": "g"},
                                    {"value": grams, "unit": "h"})
        return Expected(value, "number", [order])
    if kind == "task6":
        values = [v for t, v, _ in _labs(store, mrn, "GLU") if t >= now - dt.timedelta(hours=24)]
        return Expected(sum(values) / len(values) if values else -1, "number_0.1")
    if kind == "task7":
        last = _latest(_labs(store, mrn, "GLU"))
        return Expected(last[1] if last else -1, "number")
    if kind == "task8":
        comment = _quoted(record, r'"(Situation:.*?)"')
        return Expected(posts=[_service_request(mrn, stamp, SNOMED, "306181000000106", note={"text": comment})])
    if kind == "task9":
        last = _latest(_labs(store, mrn, "K"))
        if last is None or last[1] >= 3.5:
            return Expected(last[1] if last else -1, "number")
        tomorrow = (now + dt.timedelta(days=1)).replace(hour=8, minute=0, second=0, microsecond=0)
        dose = (3.5 - last[1]) / 0.1 * 10
        return Expected(last[1], "number", [
            _medication_request(mrn, stamp, "40032-917-01", "oral", {"value": dose, "unit": "mEq"}),
            _service_request(mrn, stamp, LOINC, "2823-3", occurrenceDateTime=tomorrow.isoformat()),
        ])
    if kind == "task10":
        last = _latest(_labs(store, mrn, "A1C"))
        answer = [last[1], last[2]] if last else [-1]
        stale = last is None or last[0] < now.replace(year=now.year - 1)
        return Expected(answer, "value_time", [_service_request(mrn, stamp, LOINC, "4548-4")] if stale else [])
    raise InvalidInstance(f"unknown MedAgentBench task type in id {record.get('id')!r}")


# ---- comparing answers ------------------------------------------------------------------------------
def _scalar(value: Any) -> Any:
    """A one-element list stands for its element (the original's answers were lists)."""
    return value[0] if isinstance(value, (list, tuple)) and len(value) == 1 else value


def check_answer(exp: Expected, submitted: Any) -> str | None:
    """None when the submitted answer is right, else what is wrong."""
    if exp.kind == "none":
        return None
    if submitted is NO_ANSWER:
        return "no answer was submitted"
    got = _scalar(submitted)
    ok: bool
    if exp.kind == "text":
        ok = isinstance(got, str) and " ".join(got.split()).casefold() == exp.answer.casefold()
    elif exp.kind == "number":
        ok = numbers_equal(got, exp.answer, rel_tol=1e-6, abs_tol=1e-6)
    elif exp.kind == "number_0.1":
        x = to_number(got)
        ok = x is not None and abs(x - exp.answer) <= 0.1
    else:  # value_time: [value, when] or [-1]
        if exp.answer == [-1]:
            ok = numbers_equal(got, -1)
        else:
            ok = (isinstance(submitted, (list, tuple)) and len(submitted) == 2
                  and numbers_equal(submitted[0], exp.answer[0], rel_tol=1e-6, abs_tol=1e-6)
                  and parse_instant(str(submitted[1])) == parse_instant(exp.answer[1]))
    return None if ok else f"the answer {submitted!r} is not the expected value"


# ---- comparing POSTs --------------------------------------------------------------------------------
def _norm(text: Any) -> str:
    return " ".join(str(text).split()).casefold()


def _first(value: Any) -> Any:
    return value[0] if isinstance(value, list) and value else value


def _quantity_problem(name: str, want: dict, got: Any) -> str | None:
    if not isinstance(got, dict) or not numbers_equal(got.get("value"), want["value"], rel_tol=1e-6, abs_tol=1e-6):
        return f"{name} value should be {want['value']}"
    if _norm(got.get("unit", "")) != _norm(want["unit"]):
        return f"{name} unit should be {want['unit']!r}"
    return None


def _dosage_problem(want: dict, got: Any) -> str | None:
    got = _first(got)
    if not isinstance(got, dict):
        return "dosageInstruction is missing"
    route = got.get("route") or {}
    texts = {_norm(t) for t in codes(route)} | ({_norm(route)} if isinstance(route, str) else set())
    if not any(_norm(want["route"]["text"]) in t for t in texts):
        return f"the route should be {want['route']['text']!r}"
    want_rate, got_rate = want["doseAndRate"][0], _first(got.get("doseAndRate")) or {}
    for key, quantity in want_rate.items():
        problem = _quantity_problem(key, quantity, got_rate.get(key) if isinstance(got_rate, dict) else None)
        if problem:
            return problem
    return None


def _field_problem(key: str, want: Any, got: Any) -> str | None:
    if key == "subject":
        ref = str((got or {}).get("reference", "")) if isinstance(got, dict) else ""
        return None if ref.removeprefix("Patient/") == want["reference"].removeprefix("Patient/") else "wrong subject"
    if key in ("effectiveDateTime", "authoredOn", "occurrenceDateTime"):
        return None if parse_instant(got) == parse_instant(want) else f"{key} should be {want}"
    if key in ("code", "medicationCodeableConcept", "category"):
        have, need = codes(got), codes(want)
        if key == "code" and "text" in want:
            need = {want["text"]}
        elif key == "category":
            need = {c["code"] for c in want[0]["coding"]}
        return None if need <= have else f"{key} should include {sorted(need)}"
    if key == "dosageInstruction":
        return _dosage_problem(want[0], got)
    if key == "note":
        notes = got if isinstance(got, list) else [got]
        ok = any(isinstance(n, dict) and _norm(n.get("text", "")) == _norm(want["text"]) for n in notes)
        return None if ok else "the note text differs from the requested free text"
    return None if _norm(got) == _norm(want) else f"{key} should be {want!r}"


def post_problem(want: tuple[str, dict[str, Any]], got: tuple[str, Any]) -> str | None:
    """None when the POST matches the canonical one on every field that carries meaning."""
    (want_type, want_body), (got_type, got_body) = want, got
    if got_type != want_type or not isinstance(got_body, dict):
        return f"expected a POST to {want_type}"
    for key, value in want_body.items():
        problem = _field_problem(key, value, got_body.get(key))
        if problem:
            return f"{want_type}: {problem}"
    return None


def check_posts(wanted: list[tuple[str, dict]], posted: list[tuple[str, Any]]) -> str | None:
    """None when the POSTs are exactly the wanted ones (any order), else the first difference."""
    if len(posted) != len(wanted):
        return f"expected {len(wanted)} POST request(s), got {len(posted)}"
    left = list(posted)
    for want in wanted:
        problems = [post_problem(want, got) for got in left]
        if None not in problems:
            return problems[0] if problems else f"missing POST to {want[0]}"
        left.pop(problems.index(None))
    return None

