"""The API is documented (/api/v1/openapi.json, from Pydantic models of every answer) and
keeps to its documentation: a schemathesis run over every operation of the live app, with an
ordinary and an admin token, finds no server error and no answer that breaks its schema."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error, response_schema_conformance

from leaderboard.service.auth import create_token
from leaderboard.service.db import Database

from lb_helpers import fixture_uploads, make_database

CHECKS = [not_a_server_error, response_schema_conformance]
EXAMPLES = 25


@pytest.fixture(scope="module")
def live(tmp_path_factory, data_dir, usb_fixture_dir):
    """An instance with scored entries (a predictions file, the baselines) and tokens."""
    from leaderboard.service.app import create_app
    from leaderboard.service.auth import authenticate
    from leaderboard.service.settings import load_settings
    from leaderboard.service.submissions import accept
    from leaderboard.service.worker import Worker

    root = tmp_path_factory.mktemp("schema")
    shutil.copytree(data_dir / "all", root / "gold" / "all")
    url = make_database(root / "lb.sqlite", usb_data=root / "gold", n_resamples=20,
                        open_instance=False, quota_per_day=10_000, quota_per_week=10_000)
    database = Database(url)
    tokens = {"user": create_token(database, "fuzz"),
              "admin": create_token(database, "root", admin=True)}
    accept(database, load_settings(database), authenticate(database, tokens["user"]),
           track_name="usb", board="all", model="m", card={},
           uploads=fixture_uploads(usb_fixture_dir, {"fixing_factuality"}))
    Worker(database).drain()
    return {"app": create_app(url), "tokens": tokens}


@pytest.mark.slow
def test_every_answer_keeps_to_the_documented_schema(live):
    """Every operation of the schema, EXAMPLES generated requests each (hypothesis, driven
    here rather than through schemathesis' pytest plugin, which follows pytest's internals)."""
    schema = schemathesis.openapi.from_asgi("/api/v1/openapi.json", live["app"])
    calls: list[str] = []
    for result in schema.get_all_operations():
        operation = result.ok()
        who = "admin" if "/admin/" in operation.path else "user"
        fuzz(operation, {"Authorization": f"Bearer {live['tokens'][who]}"}, calls)
    assert len(set(calls)) >= 14 and len(calls) >= 200, (len(set(calls)), len(calls))


def fuzz(operation, headers: dict, calls: list[str]) -> None:
    """EXAMPLES generated requests to one operation, each answer checked."""
    @settings(max_examples=EXAMPLES, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(case=operation.as_strategy())
    def call(case):
        calls.append(operation.label)
        case.call_and_validate(headers=headers, checks=CHECKS)

    call()


def test_the_schema_documents_every_api_route(live):
    from fastapi.testclient import TestClient

    document = TestClient(live["app"]).get("/api/v1/openapi.json").json()
    paths = document["paths"]
    assert all(path.startswith("/api/v1/") for path in paths)  # pages are not the API
    for path, operations in paths.items():
        for method, operation in operations.items():
            ok = operation["responses"].get("200") or operation["responses"].get("202")
            content = ok["content"]
            assert "schema" in next(iter(content.values())), (method, path)
    view = paths["/api/v1/submissions/{submission_id}"]["get"]["responses"]["200"]
    assert view["content"]["application/json"]["schema"]["$ref"].endswith("SubmissionView")


def test_the_api_reference_page_is_current(live):
    """docs/api.md is `sumbench leaderboard openapi --markdown` of the live app's schema
    (regenerate: `sumbench leaderboard openapi --markdown > docs/api.md`)."""
    from fastapi.testclient import TestClient

    from leaderboard.service.api_doc import api_markdown
    from leaderboard.service.app import openapi_document

    served = TestClient(live["app"]).get("/api/v1/openapi.json").json()
    assert served == openapi_document()
    page = Path(__file__).resolve().parents[2] / "docs" / "api.md"
    assert page.read_text(encoding="utf-8") == api_markdown(served)
