"""The FHIR operations file (``funcs_v1.json``): rendering it for the prompt, and building one.

Each entry is ``{"name": "GET {api_base}/Observation", "description": ..., "parameters": <JSON schema>}``;
for a POST the schema describes the resource's fields, nested through objects and arrays.
"""

from __future__ import annotations

from typing import Any

MAX_DESCRIPTION = 160


def _short(text: Any, first_sentence: bool = False) -> str:
    """A description on one line, at most MAX_DESCRIPTION characters (optionally its first sentence only)."""
    words = " ".join(str(text or "").split())
    if first_sentence:
        words = words.split(". ")[0].rstrip(".")
    return words if len(words) <= MAX_DESCRIPTION else words[: MAX_DESCRIPTION - 3] + "..."


def flatten(schema: dict[str, Any], prefix: str = "") -> list[tuple[str, str]]:
    """(path, description) of every leaf field: 'category[].coding[].system'."""
    out: list[tuple[str, str]] = []
    for name, sub in (schema.get("properties") or {}).items():
        path = f"{prefix}{name}"
        if not isinstance(sub, dict):
            continue
        if sub.get("type") == "array" and isinstance(sub.get("items"), dict):
            sub, path = sub["items"], path + "[]"
        if sub.get("properties"):
            out += flatten(sub, path + ".")
        else:
            out.append((path, _short(sub.get("description"))))
    return out


def describe_functions(funcs: list[dict[str, Any]]) -> str:
    """Prompt text: one line per operation, then its fields (on the same line when none has a description)."""
    lines = []
    for f in funcs:
        head = f"- {f['name'].replace('{api_base}', '$FHIR_BASE_URL/').replace('//', '/')}: "
        head += _short(f.get("description"), first_sentence=True)
        fields = flatten(f.get("parameters") or {})
        if any(desc for _, desc in fields):
            lines += [head, *(f"    {path}" + (f": {desc}" if desc else "") for path, desc in fields)]
        else:
            lines.append(head + (f" (fields: {', '.join(path for path, _ in fields)})" if fields else ""))
    return "\n".join(lines)


def schema_from_fields(fields: dict[str, str]) -> dict[str, Any]:
    """A JSON schema from dotted paths ('a[].b': description), the inverse of ``flatten``."""
    root: dict[str, Any] = {"type": "object", "properties": {}}
    for path, description in fields.items():
        node = root
        parts = path.split(".")
        for i, part in enumerate(parts):
            name, is_array = part.removesuffix("[]"), part.endswith("[]")
            leaf = i == len(parts) - 1
            child = node["properties"].setdefault(
                name, {"type": "string"} if leaf and not is_array else {"type": "object", "properties": {}}
            )
            if is_array:
                if child.get("type") != "array":
                    child = node["properties"][name] = {"type": "array", "items": child}
                child = child["items"]
            if leaf:
                child["description"] = description
            node = child
    return root
