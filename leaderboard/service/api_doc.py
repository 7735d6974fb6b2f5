"""The API reference page (docs/api.md), written from the API's own OpenAPI document:
`sumbench leaderboard openapi --markdown` prints it, and a test checks the page is current."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

METHODS = ("get", "post", "delete")
#: schemas FastAPI writes for itself (the form body and its validation errors)
INTERNAL = ("Body_", "HTTPValidationError", "ValidationError")


def type_of(schema: Mapping[str, Any]) -> str:
    """A schema as a short type: `Name` links, list[...], dict[str, ...], a | b."""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return name if name.startswith(INTERNAL) else f"[{name}](#{name.lower()})"
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return " \\| ".join(type_of(item) for item in schema[key])
    kind = schema.get("type")
    if kind == "array":
        return f"list[{type_of(schema.get('items', {}))}]"
    if kind == "object" and isinstance(schema.get("additionalProperties"), Mapping):
        return f"dict[str, {type_of(schema['additionalProperties'])}]"
    if "enum" in schema:
        return " \\| ".join(f"`{value}`" for value in schema["enum"])
    if "const" in schema:
        return f"`{schema['const']}`"
    return {"integer": "int", "number": "float", "string": "str", "boolean": "bool",
            "object": "object", "null": "null"}.get(kind, "any")


def operation_lines(path: str, method: str, operation: Mapping[str, Any],
                    schemas: Mapping[str, Any]) -> list[str]:
    lines = [f"### `{method.upper()} {path}`", "", operation.get("summary", ""), ""]
    parameters = operation.get("parameters", [])
    if parameters:
        lines += ["| parameter | in | type | required |", "| --- | --- | --- | --- |"]
        lines += [f"| `{p['name']}` | {p['in']} | {type_of(p.get('schema', {}))} | "
                  f"{'yes' if p.get('required') else 'no'} |" for p in parameters]
        lines.append("")
    body = operation.get("requestBody", {}).get("content", {})
    for media, content in body.items():
        ref = content.get("schema", {}).get("$ref", "").rsplit("/", 1)[-1]
        fields = schemas.get(ref, {}).get("properties", {})
        required = set(schemas.get(ref, {}).get("required", ()))
        lines += [f"Body ({media}): " + ", ".join(
            f"`{name}`{'' if name in required else ' (optional)'}" for name in fields), ""]
    lines += ["| answer | body |", "| --- | --- |"]
    for code, answer in sorted(operation.get("responses", {}).items()):
        content = answer.get("content", {})
        body_type = "; ".join(f"{type_of(c.get('schema', {}))} ({media})"
                              for media, c in content.items()) or "—"
        lines.append(f"| {code} {answer.get('description', '')} | {body_type} |")
    return lines + [""]


def schema_lines(name: str, schema: Mapping[str, Any]) -> list[str]:
    lines = [f"### {name}", "", (schema.get("description") or "").replace("\n", " "), "",
             "| field | type | required |", "| --- | --- | --- |"]
    required = set(schema.get("required", ()))
    for field, spec in schema.get("properties", {}).items():
        lines.append(f"| `{field}` | {type_of(spec)} | {'yes' if field in required else 'no'} |")
    if schema.get("additionalProperties") is True:
        lines.append("| (more) | any | no |")
    return lines + [""]


def api_markdown(document: Mapping[str, Any]) -> str:
    """The API reference page: every operation (parameters, body fields, answers), then
    every model an answer is made of."""
    schemas = document.get("components", {}).get("schemas", {})
    lines = ["# API reference", "",
             "Generated from the API's OpenAPI document (`GET /api/v1/openapi.json`, or "
             "`sumbench leaderboard openapi`); a test checks this page is current. Send "
             "`Authorization: Bearer TOKEN` where a route needs a user. "
             "[The leaderboard](leaderboard.md) says what each answer may show.", "",
             "## Operations", ""]
    for path, operations in document.get("paths", {}).items():
        for method in METHODS:
            if method in operations:
                lines += operation_lines(path, method, operations[method], schemas)
    lines += ["## Models", ""]
    for name, schema in sorted(schemas.items()):
        if not name.startswith(INTERNAL):
            lines += schema_lines(name, schema)
    return "\n".join(lines).rstrip() + "\n"
