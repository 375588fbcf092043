"""A small FHIR R4 server for MedAgentBench episodes, on 127.0.0.1 in a background thread.

Each episode talks to its own base URL ``http://127.0.0.1:PORT/<episode>/fhir/``, so concurrent episodes
never see each other's writes. GET searches come from a store: ``LocalStore`` (resources from a JSON file,
e.g. the synthetic sample) or ``UpstreamStore`` (a real FHIR server such as MedAgentBench's, proxied).
POSTs are recorded per episode for the grader and answered 201; they are never forwarded upstream, and with
a local store the created resource becomes visible to that episode's own searches. ``reset`` clears it.
"""

from __future__ import annotations

import datetime as dt
import json
import threading
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol

# Search parameters each resource type supports, with the resource field a `date` parameter compares.
SEARCH_PARAMS: dict[str, tuple[str, ...]] = {
    "Patient": ("_id", "identifier", "given", "family", "name", "birthdate", "gender"),
    "Observation": ("patient", "subject", "code", "category", "date"),
    "MedicationRequest": ("patient", "subject", "code", "category", "date"),
    "Condition": ("patient", "subject", "code", "category"),
    "Procedure": ("patient", "subject", "code", "date"),
    "ServiceRequest": ("patient", "subject", "code", "category", "date"),
}
DATE_FIELDS = {"Observation": "effectiveDateTime", "MedicationRequest": "authoredOn",
               "Procedure": "performedDateTime", "ServiceRequest": "authoredOn"}
# Result-shaping parameters that do not filter.
IGNORED_PARAMS = {"_count", "_format", "_sort", "_summary", "_total"}
MAX_BODY = 1_000_000


class FhirSearchError(ValueError):
    pass


def parse_instant(text: Any) -> dt.datetime | None:
    """An aware datetime from an ISO date or date-time (naive values are taken as UTC); None if unparseable."""
    if not isinstance(text, str):
        return None
    try:
        value = dt.datetime.fromisoformat(text.strip())
    except ValueError:
        return None
    return value if value.tzinfo else value.replace(tzinfo=dt.UTC)


def codes(concept: Any) -> set[str]:
    """Every code and text of a CodeableConcept (or a list of them), as 'code' and 'system|code'."""
    out: set[str] = set()
    for c in concept if isinstance(concept, list) else [concept]:
        if not isinstance(c, dict):
            continue
        if isinstance(c.get("text"), str):
            out.add(c["text"])
        for coding in c.get("coding") or []:
            if isinstance(coding, dict) and coding.get("code") is not None:
                out |= {str(coding["code"]), f"{coding.get('system', '')}|{coding['code']}"}
    return out


def _date_matches(value: dt.datetime | None, query: str) -> bool:
    prefix, text = (query[:2], query[2:]) if query[:2] in {"eq", "ne", "gt", "lt", "ge", "le"} else ("eq", query)
    bound = parse_instant(text)
    if bound is None:
        raise FhirSearchError(f"cannot parse date {query!r}")
    if value is None:
        return False
    if len(text.strip()) == 10:  # a bare date compares by calendar day
        value, bound = value.date(), bound.date()  # type: ignore[assignment]
    return {"eq": value == bound, "ne": value != bound, "gt": value > bound, "lt": value < bound,
            "ge": value >= bound, "le": value <= bound}[prefix]


def _matches(rtype: str, res: dict[str, Any], name: str, value: str) -> bool:
    low = value.strip().lower()
    if name == "_id":
        return res.get("id") == value
    if name in ("patient", "subject"):
        ref = str((res.get("subject") or {}).get("reference", ""))
        return ref.removeprefix("Patient/") == value.removeprefix("Patient/")
    if name == "identifier":
        return any(i.get("value") == value.split("|")[-1] for i in res.get("identifier") or [])
    if name in ("given", "family", "name"):
        parts = []
        for n in res.get("name") or []:
            parts += ([n.get("family", "")] if name != "given" else []) + (n.get("given", []) if name != "family" else [])
        return any(str(p).lower().startswith(low) for p in parts)
    if name == "birthdate":
        return _date_matches(parse_instant(res.get("birthDate")), value)
    if name == "gender":
        return str(res.get("gender", "")).lower() == low
    if name == "code":
        concept = res.get("code") or res.get("medicationCodeableConcept")
        return bool(codes(concept) & set(value.split(",")))
    if name == "category":
        return bool(codes(res.get("category")) & set(value.split(",")))
    if name == "date":
        return _date_matches(parse_instant(res.get(DATE_FIELDS[rtype])), value)
    return False


def search(resources: list[dict[str, Any]], rtype: str, params: dict[str, list[str]]) -> list[dict[str, Any]]:
    """FHIR search semantics for the supported parameters; repeated parameters must all match."""
    allowed = SEARCH_PARAMS.get(rtype)
    if allowed is None:
        raise FhirSearchError(f"resource type {rtype!r} is not served (served: {', '.join(SEARCH_PARAMS)})")
    for name in params:
        if name not in allowed and name not in IGNORED_PARAMS:
            raise FhirSearchError(f"{rtype} does not support the search parameter {name!r} (supported: {allowed})")
    return [
        r for r in resources
        if all(_matches(rtype, r, n, v) for n, vs in params.items() if n not in IGNORED_PARAMS for v in vs)
    ]


class Store(Protocol):
    def search(self, rtype: str, params: dict[str, list[str]]) -> list[dict[str, Any]]: ...

    def forward(self, path: str, query: str) -> tuple[int, bytes] | None:
        """Raw upstream answer for a GET, or None when searches are answered locally."""


class LocalStore:
    def __init__(self, resources: list[dict[str, Any]]):
        self.by_type: dict[str, list[dict[str, Any]]] = {}
        for r in resources:
            self.by_type.setdefault(r["resourceType"], []).append(r)

    def search(self, rtype: str, params: dict[str, list[str]]) -> list[dict[str, Any]]:
        return search(self.by_type.get(rtype, []), rtype, params)

    def forward(self, path: str, query: str) -> None:
        return None


class UpstreamStore:
    """A real FHIR server; searches ask it for every match in one JSON page."""

    def __init__(self, base_url: str, timeout: float = 60.0):
        self.base = base_url.rstrip("/") + "/"
        self.timeout = timeout

    def forward(self, path: str, query: str) -> tuple[int, bytes]:
        url = self.base + path + (f"?{query}" if query else "")
        try:
            with urllib.request.urlopen(url, timeout=self.timeout) as resp:
                return resp.status, resp.read()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()

    def search(self, rtype: str, params: dict[str, list[str]]) -> list[dict[str, Any]]:
        query = urllib.parse.urlencode({**params, "_count": ["5000"], "_format": ["json"]}, doseq=True)
        status, body = self.forward(rtype, query)
        if status != 200:
            raise OSError(f"FHIR server {self.base} answered {status} to {rtype}?{query}")
        return [e["resource"] for e in json.loads(body).get("entry") or []]


@dataclass
class Episode:
    posts: list[tuple[str, Any]] = field(default_factory=list)  # (resource type, parsed payload)
    created: list[dict[str, Any]] = field(default_factory=list)


def bundle(resources: list[dict[str, Any]], self_url: str) -> dict[str, Any]:
    return {
        "resourceType": "Bundle", "type": "searchset", "total": len(resources),
        "link": [{"relation": "self", "url": self_url}],
        "entry": [{"fullUrl": f"{r['resourceType']}/{r.get('id')}", "resource": r, "search": {"mode": "match"}}
                  for r in resources],
    }


def outcome(message: str) -> dict[str, Any]:
    return {"resourceType": "OperationOutcome", "issue": [{"severity": "error", "code": "processing",
                                                           "diagnostics": message}]}


class FhirServer:
    def __init__(self, store: Store):
        self.store = store
        self._episodes: dict[str, Episode] = {}
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._httpd.daemon_threads = True
        self.port = self._httpd.server_address[1]
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="fhir-server", daemon=True)
        self._thread.start()

    def base_url(self, episode: str) -> str:
        return f"http://127.0.0.1:{self.port}/{episode}/fhir/"

    def episode(self, name: str) -> Episode:
        with self._lock:
            return self._episodes.setdefault(name, Episode())

    def reset(self, name: str) -> None:
        with self._lock:
            self._episodes[name] = Episode()

    def posts(self, name: str) -> list[tuple[str, Any]]:
        with self._lock:
            return list(self._episodes.get(name, Episode()).posts)

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


def _handler(server: FhirServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:  # the run log is not the place for per-request lines
            pass

        def _send(self, status: int, body: Any) -> None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/fhir+json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _route(self) -> tuple[str, str, str] | None:
            url = urllib.parse.urlsplit(self.path)
            parts = url.path.strip("/").split("/")
            if len(parts) < 3 or parts[1] != "fhir":
                self._send(404, outcome("use the base URL http://127.0.0.1:PORT/<episode>/fhir/"))
                return None
            return parts[0], "/".join(parts[2:]), url.query

        def do_GET(self) -> None:
            route = self._route()
            if route is None:
                return
            episode, path, query = route
            try:
                forwarded = server.store.forward(path, query)
            except OSError as exc:  # the upstream server is down: tell the client instead of hanging up
                return self._send(502, outcome(f"the upstream FHIR server is unreachable: {exc}"))
            if forwarded is not None:
                self._send(*forwarded)
            elif path == "metadata":
                self._send(200, {"resourceType": "CapabilityStatement", "status": "active", "fhirVersion": "4.0.1",
                                 "rest": [{"mode": "server", "resource": [{"type": t} for t in SEARCH_PARAMS]}]})
            else:
                params = urllib.parse.parse_qs(query, keep_blank_values=True)
                try:
                    found = server.store.search(path, params)
                    own = [r for r in server.episode(episode).created if r["resourceType"] == path]
                    found += search(own, path, params)
                except FhirSearchError as exc:
                    return self._send(400, outcome(str(exc)))
                self._send(200, bundle(found, self.path))

        def do_POST(self) -> None:
            route = self._route()
            if route is None:
                return
            episode, rtype, _ = route
            length = int(self.headers.get("Content-Length") or 0)
            if length > MAX_BODY:
                return self._send(413, outcome("request body too large"))
            raw = self.rfile.read(length)
            try:
                payload = json.loads(raw or b"null")
            except json.JSONDecodeError as exc:
                payload = None
                message = f"the body is not JSON: {exc}"
            else:
                message = "" if isinstance(payload, dict) else "the body must be a JSON object (a FHIR resource)"
            ep = server.episode(episode)
            with server._lock:
                ep.posts.append((rtype, payload))
                resource = None if message else {
                    **payload, "resourceType": payload.get("resourceType", rtype), "id": f"{episode[:6]}-{len(ep.posts)}"
                }
                # Created resources are searchable only over a local store; a real server is never written to.
                if resource is not None and isinstance(server.store, LocalStore) and rtype in SEARCH_PARAMS:
                    ep.created.append(resource)
            if resource is None:
                return self._send(400, outcome(message))
            self._send(201, resource)

    return Handler
