"""The leaderboard service in process: a real SQLite file, the FastAPI app through its ASGI
interface, the worker, pages, API, security rules and the static export."""
from __future__ import annotations

import json
import re
import shutil
import sys

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from leaderboard.intake.validate import Upload
from leaderboard.service.auth import create_token
from leaderboard.service.db import AuditEntry, Database, Score, Submission, Token
from leaderboard.service.settings import load_settings, save_settings
from leaderboard.service.worker import Worker
from leaderboard.tracks import SubmissionErrors
from tasks.scoring import score_files

from lb_helpers import (
    fixture_uploads,
    gold_strings,
    make_database,
    minimal_lines,
    scored_fix_submission,
    write_pyramid_folder,
)

HOSTILE = "<script>alert('x')</script>"


@pytest.fixture(scope="module")
def service(tmp_path_factory, data_dir):
    from leaderboard.service.app import create_app

    root = tmp_path_factory.mktemp("lb")
    pyramid = write_pyramid_folder(root / "tinyset")
    gold = root / "gold"  # the `all` variant only: the domain variants hold single items
    shutil.copytree(data_dir / "all", gold / "all")
    url = make_database(root / "lb.sqlite", usb_data=gold, pyramid=pyramid, n_resamples=60)
    database = Database(url)
    tokens = {name: create_token(database, name, admin=(name == "admin"))
              for name in ("alice", "bob", "admin")}
    client = TestClient(create_app(url))
    return {"url": url, "database": database, "tokens": tokens, "client": client,
            "root": root, "worker": Worker(database), "responses": []}


def _auth(service, user):
    return {"Authorization": f"Bearer {service['tokens'][user]}"}


def _files(uploads):
    return [("files", (u.name, u.data)) for u in uploads]


def _get(service, url, **kwargs):
    response = service["client"].get(url, **kwargs)
    service["responses"].append(response.content)
    return response


def _submit(service, uploads, model="model-a", user="alice", variant="all", card=None,
            track="usb"):
    response = service["client"].post(
        "/api/v1/submissions", files=_files(uploads), headers=_auth(service, user),
        data={"model": model, "variant": variant, "track": track,
              "card": json.dumps(card or {})})
    service["responses"].append(response.content)
    return response


@pytest.fixture(scope="module")
def scored(service, usb_fixture_dir):
    """A full USB submission (hostile model name) and a FIX-only one, scored and analysed."""
    full = _submit(service, fixture_uploads(usb_fixture_dir), model=HOSTILE,
                   card={"base_model": "flan-t5-large", "link": "javascript:alert(1)"})
    assert full.status_code == 202, full.text
    fix_path = usb_fixture_dir / "predictions" / "fixing_factuality.jsonl"
    partial = _submit(service, [Upload("fix.jsonl", minimal_lines(fix_path))], model="fix-only")
    assert partial.status_code == 202
    assert service["worker"].drain() == 4
    return full.json()["id"], partial.json()["id"]


@pytest.mark.slow
def test_scores_are_exactly_those_of_sumbench_score(service, scored, usb_fixture_dir):
    """An admin reads the whole test set's metric dicts (`scores`); on an instance without a
    private part and without the Ladder, everyone reads the same dicts as `public_scores`."""
    answer = _get(service, f"/api/v1/submissions/{scored[0]}",
                  headers=_auth(service, "admin")).json()
    public = _get(service, f"/api/v1/submissions/{scored[0]}").json()
    assert "scores" not in public and "admin" not in public
    assert public["public_scores"] == answer["scores"] and not public["laddered"]
    assert answer["status"] == "scored" and answer["model"] == HOSTILE
    expected = score_files(sorted((usb_fixture_dir / "predictions").glob("*.jsonl")))
    assert sorted(answer["scores"]) == sorted(expected)
    for task, metrics in expected.items():
        assert set(answer["scores"][task]) == set(metrics)
        for key, value in metrics.items():
            if isinstance(value, float):
                assert answer["scores"][task][key] == pytest.approx(value, abs=1e-12)
            else:
                assert answer["scores"][task][key] == value
    versions = answer["versions"]
    assert versions["scorer"] and versions["git"]["commit"] and versions["sumbench"]
    assert set(versions["parts"]["fixing_factuality"]) == {"gold", "task_version"}
    breakdown = answer["breakdown"]  # fixture domains hold 1-6 items: withheld
    assert set(breakdown) == {"biographies", "companies", "disasters"}
    assert breakdown["companies"]["factuality_classification"] == {
        "n_records": 6, "withheld": "a domain has fewer than 10 test items"}


def test_board_ranks_complete_entries_and_lists_partial_ones_apart(service, scored):
    board = _get(service, "/api/v1/leaderboard/usb", params={"variant": "all"}).json()
    by_id = {entry["id"]: entry for entry in board["entries"]}
    full, partial = by_id[scored[0]], by_id[scored[1]]
    assert full["rank"] == 1 and full["band"] == 1 and full["aggregate_ci95"]
    assert partial["rank"] is None and set(partial["scores"]) == {"fixing_factuality"}
    baseline = next(e for e in board["entries"] if e["badge"] == "computed here (baseline)")
    assert baseline["rank"] == 2 and baseline["band"] == 2  # significantly worse
    assert [row["model"] for row in board["published"]][0] == "Flan-T5-Large"
    assert "never ranked as if they scored 0" in board["rules"]["aggregate"]
    csv_text = _get(service, "/api/v1/leaderboard/usb.csv", params={"variant": "all"}).text
    assert csv_text.splitlines()[0].startswith("id,model,source,list,rank,band,aggregate")
    assert len(csv_text.splitlines()) == 1 + len(board["entries"])


def test_a_task_page_ranks_the_task_with_each_entry_s_metric_dict(service, scored):
    board = _get(service, "/api/v1/leaderboard/usb", params={"variant": "all"}).json()
    fix = "fixing_factuality"
    expected = sorted((e for e in board["entries"] if e["scores"].get(fix) is not None),
                      key=lambda e: -e["scores"][fix])
    page = _get(service, f"/track/usb/task/{fix}", params={"variant": "all"})
    assert page.status_code == 200
    ranked = page.text.split('id="part-ranked"', 1)[1].split("</table>", 1)[0]
    assert re.findall(r'<tr data-id="(\d+)">', ranked) == [str(e["id"]) for e in expected]
    assert "<h1>Fixing factuality (exact match)</h1>" in page.text
    metrics = _get(service, f"/api/v1/submissions/{scored[1]}").json()["public_scores"][fix]
    assert f"{metrics['rouge1']:.4f}" in ranked and "&lt;script&gt;" in ranked
    assert "withheld (" in page.text  # the fixture's domains are too small to publish
    assert "item by item" not in page.text  # hidden gold: no item pages
    for url in (f"/track/usb/task/{fix}?variant=nope", "/track/usb/task/nope?variant=all"):
        assert _get(service, url).status_code == 404
    refused = _get(service, f"/items/{scored[0]}", params={"task": fix})
    assert refused.status_code == 404 and "only where the test gold is public" in refused.text


def test_pages_escape_names_and_send_a_content_security_policy(service, scored):
    for url in ("/", "/track/usb?variant=all", f"/submission/{scored[0]}",
                f"/compare?a={scored[0]}&b=1", "/track/summaries?variant=tinyset"):
        response = _get(service, url)
        assert response.status_code == 200, url
        assert "script-src 'self'" in response.headers["content-security-policy"]
        assert "<script>alert" not in response.text
    page = _get(service, f"/submission/{scored[0]}").text
    assert "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;" in page
    assert 'href="javascript:' not in page  # a non-http link is shown as text only
    assert "self-reported metadata" in page and "scored here from predictions" in page
    assert "Per-domain breakdown" in page and "withheld (6 items)" in page
    assert "Rank 1 of" in page
    compare = _get(service, f"/compare?a={scored[0]}&b=1").text
    assert re.search(r"<td>mean</td>.*<td>yes</td>", compare, re.S)


def test_rejections_are_4xx_naming_file_line_field_and_store_only_an_audit_row(
        service, usb_fixture_dir):
    with service["database"].session() as session:
        before = session.query(Submission).count()
    bad = minimal_lines(usb_fixture_dir / "predictions" / "abstractive_summarization.jsonl")
    bad = bad.replace(b'"prediction": "', b'"prediction": 7, "x": "', 1)
    response = _submit(service, [Upload("abs.jsonl", bad)], model="broken")
    assert response.status_code == 422
    error = response.json()["errors"][0]
    assert (error["file"], error["line"], error["field"]) == ("abs.jsonl", 1, "prediction")
    with service["database"].session() as session:
        assert session.query(Submission).count() == before
        last = session.scalars(select(AuditEntry).order_by(AuditEntry.id.desc())).first()
        assert (last.actor, last.action, last.outcome) == ("alice", "submit", "rejected")
        assert "abs.jsonl" in last.detail


@pytest.mark.parametrize("card, field, message", [
    ({"notes": "\ud800x"}, "notes", "lone UTF-16 surrogate"),
    ({"notes": "safe\u202egnp.exe"}, "notes", "control characters and bidi controls"),
    ({"link": "https://a.example/\x1b[2J"}, "link", "control characters and bidi controls"),
    ({"training_data": "USB train split\r=cmd|' /C calc'!A0"}, "training_data",
     "carriage returns (CR) included"),
    ({"seed": int("9" * 600)}, "seed", "at most 500 characters"),
    ([1, 2], "card", "expected a JSON object of model card fields, got array"),
])
def test_bad_model_cards_are_refused_naming_the_field(service, usb_fixture_dir, card, field,
                                                       message):
    path = usb_fixture_dir / "predictions" / "fixing_factuality.jsonl"
    response = _submit(service, [Upload("fix.jsonl", minimal_lines(path))], model="card",
                       card=card)
    assert response.status_code == 422, response.text
    (error,) = response.json()["errors"]
    assert error["field"] == field and message in error["message"]


def test_card_text_in_any_script_is_kept_and_only_hidden_controls_are_refused():
    from leaderboard.card import check_card
    from tasks.plumbing.errors import DataError

    texts = ["line one\nline two\ttab", "nbsp\u00a0here \u202f and \u3000 full width",
             "family \U0001F468\u200d\U0001F469\u200d\U0001F467, Persian "
             "\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645",
             "soft\u00adhyphen, Zürich, 東京, naïve"]
    for text in texts:
        assert check_card({"notes": text}) == {"notes": text}
    for text in ("bell\x07", "escape\x1b[31m", "rlo\u202e", "isolate\u2067x\u2069",
                 "mark\u200f", "line one\r\nline two", "bare\rreturn", "line\u2028separator"):
        with pytest.raises(DataError, match="control characters and bidi controls"):
            check_card({"notes": text})
    # the CSV's text field: new lines only (a tab would read as a column break there)
    assert check_card({"training_data": "USB train\nsplit"}) == {
        "training_data": "USB train\nsplit"}
    with pytest.raises(DataError, match="text and new lines \\(LF\\) are") as caught:
        check_card({"training_data": "USB\ttrain"})
    assert caught.value.field == "training_data"
    with pytest.raises(DataError) as caught:  # JSON of the wrong shape: said as such
        from leaderboard.service.request_checks import parse_card
        parse_card("[1, 2]")
    assert caught.value.reason == "expected a JSON object of model card fields, got array"


@pytest.mark.parametrize("card, message", [
    # deeper than any Python's json parses (3.12 parses 5000 levels: see the next test)
    ("[" * 100_000 + "]" * 100_000, "card is not JSON one can read: nested too deeply"),
    ('{"seed": 1, "seed": 2}', "'seed' is given twice in one object"),
    ('{"seed": ' + "7" * 5000 + "}", "card is not JSON one can read: Exceeds the limit"),
])
def test_unreadable_card_json_is_refused_not_a_server_error(service, usb_fixture_dir, card,
                                                           message):
    path = usb_fixture_dir / "predictions" / "fixing_factuality.jsonl"
    response = service["client"].post(
        "/api/v1/submissions", headers=_auth(service, "alice"),
        files=[("files", ("fix.jsonl", minimal_lines(path)))],
        data={"model": "raw-card", "card": card})
    service["responses"].append(response.content)
    assert response.status_code == 422, response.text
    (error,) = response.json()["errors"]
    assert error["field"] == "card" and message in error["message"]


@pytest.mark.parametrize("card, field, message", [
    ("[" * 5000 + "]" * 5000, "card", "expected a JSON object of model card fields, got array"),
    ('{"notes": ' * 5000 + '"x"' + "}" * 5000, "notes", "expected a string or a number"),
])
def test_a_deep_card_that_python_parses_is_refused_for_its_shape(service, usb_fixture_dir,
                                                                 card, field, message):
    """Python 3.12 and later parse 5000 nested levels at their default limits (3.11 stops at
    about 1000): such a card is refused for its shape, never a server error. The recursion
    limit is raised here so that 3.11 parses it too."""
    path = usb_fixture_dir / "predictions" / "fixing_factuality.jsonl"
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 20_000))
    try:
        response = service["client"].post(
            "/api/v1/submissions", headers=_auth(service, "alice"),
            files=[("files", ("fix.jsonl", minimal_lines(path)))],
            data={"model": "deep-card", "card": card})
    finally:
        sys.setrecursionlimit(limit)
    assert response.status_code == 422, response.text
    (error,) = response.json()["errors"]
    assert error["field"] == field and message in error["message"], error


def test_a_retry_with_a_bad_card_is_refused_not_answered_as_a_duplicate(service,
                                                                        usb_fixture_dir):
    path = usb_fixture_dir / "predictions" / "fixing_factuality.jsonl"
    uploads = [Upload("fix.jsonl", minimal_lines(path))]
    first = _submit(service, uploads, model="retry-card", card={"seed": 1})
    assert first.status_code == 202, first.text
    again = _submit(service, uploads, model="retry-card", card={"seed": float("nan")})
    assert again.status_code == 422 and again.json()["errors"][0]["field"] == "seed"
    same = _submit(service, uploads, model="retry-card", card={"seed": 1})
    assert same.status_code == 200 and same.json()["duplicate"] is True
    assert same.json()["message"].endswith("nothing new was stored")
    other = _submit(service, uploads, model="retry-card", card={"seed": 2, "licence": "mit"})
    assert other.status_code == 200 and other.json()["message"].endswith(
        f"nothing new was stored; the card sent now differs from the stored one (licence, "
        f"seed) and was not applied: delete submission {first.json()['id']} and submit again "
        f"to change it")


def test_requests_the_api_cannot_bind_and_ids_beyond_int64(service, scored):
    client = service["client"]
    response = client.post("/api/v1/submissions", headers=_auth(service, "alice"),
                           files=[("files", ("", b"SECRET-CONTENT"))], data={})
    assert response.status_code == 422 and response.json()["status"] == "rejected"
    assert "model" in [e["field"] for e in response.json()["errors"]]
    assert b"SECRET-CONTENT" not in response.content  # the input is never echoed
    huge = 2 ** 63
    for method, url in (("get", f"/api/v1/submissions/{huge}"), ("get", f"/submission/{huge}"),
                        ("get", f"/compare?a={scored[0]}&b={10 ** 25}"),
                        ("post", f"/api/v1/submissions/{huge}/hide"),
                        ("delete", f"/api/v1/submissions/{10 ** 20}")):
        response = getattr(client, method)(url, headers=_auth(service, "alice"))
        assert response.status_code == 404, (url, response.text)
        page = not url.startswith("/api/")  # a page answers with a page, the API with JSON
        assert response.headers["content-type"].startswith(
            "text/html" if page else "application/json"), url
    missing = _get(service, "/track/%3Cb%3Ebold")
    assert missing.status_code == 404 and "<h1>404</h1>" in missing.text
    assert "<p>no board &lt;b&gt;bold/all</p>" in missing.text  # escaped, never markup
    for url in ("/", "/track/usb", "/api/v1/leaderboard/usb", f"/submission/{scored[0]}"):
        head, get = client.head(url), client.get(url)
        assert head.status_code == 200 and head.content == b"", url
        assert head.headers["content-type"] == get.headers["content-type"]


def test_forms_the_multipart_parser_refuses_are_answered_as_rejections(service):
    """More parts than Starlette's parser takes (1000 files or fields) used to be a bare 400
    {"detail"}; they are rejected submissions in the API's shape."""
    client = service["client"]
    many_files = client.post("/api/v1/submissions", headers=_auth(service, "alice"),
                             files=[("files", (f"p{i}.jsonl", b"{}")) for i in range(1001)],
                             data={"model": "many"})
    assert many_files.status_code == 422
    assert many_files.json() == {"status": "rejected", "errors": [
        {"file": None, "line": None, "field": "files",
         "message": "more than 64 files in one submission"}]}
    database, original = service["database"], load_settings(service["database"])
    try:  # a max_files above the parser's 1000 is reachable through archives only
        save_settings(database, original.with_changes({"max_files": "5000"}))
        response = client.post("/api/v1/submissions", headers=_auth(service, "alice"),
                               files=[("files", (f"p{i}.jsonl", b"{}")) for i in range(1001)],
                               data={"model": "many"})
        assert response.json()["errors"][0]["message"] == (
            "more than 1000 files in one form (the form parser's limit; up to 5000 fit in one "
            "archive)")
    finally:
        save_settings(database, original)
    many_fields = client.post("/api/v1/submissions", headers=_auth(service, "alice"),
                              files=[("files", ("p.jsonl", b"{}"))],
                              data={"model": "m", **{f"extra{i}": "x" for i in range(1001)}})
    assert many_fields.status_code == 400 and many_fields.json()["status"] == "rejected"
    assert many_fields.json()["errors"][0]["message"].startswith(
        "the submission form cannot be read: Too many fields")


def test_a_form_field_given_twice_is_refused_not_the_last_kept(service, usb_fixture_dir):
    """As a name given twice in a JSON object: which value is meant is ambiguous."""
    path = usb_fixture_dir / "predictions" / "fixing_factuality.jsonl"
    response = service["client"].post(
        "/api/v1/submissions", headers=_auth(service, "alice"),
        files=[("files", ("fix.jsonl", path.read_bytes()))],
        data={"model": ["first name", "second name"], "variant": "all"})
    assert response.status_code == 422
    assert response.json()["errors"] == [{
        "file": None, "line": None, "field": "model",
        "message": "given more than once in the form (model): which value is meant is "
                   "ambiguous"}]
    assert "second name" not in _get(service, "/api/v1/leaderboard/usb").text


def test_the_manifest_states_how_the_instance_validates(service, usb_fixture_dir):
    """So `submit --check --server` refuses what this instance would (its limits, its
    length rule), not what the defaults would."""
    from leaderboard.client import check

    database, original = service["database"], load_settings(service["database"])
    manifest = _get(service, "/api/v1/manifest/usb").json()
    assert manifest["validation"] == {"strict_lengths": True, "limits": {
        "max_bytes": original.max_upload_bytes, "max_records": original.max_records,
        "max_files": original.max_files, "max_line_bytes": 1 << 20}}
    fix = usb_fixture_dir / "predictions" / "fixing_factuality.jsonl"
    upload = Upload("fix.jsonl", fix.read_bytes())
    assert check([upload], "usb", "all", manifest)["parts"] == {"fixing_factuality": 7}
    try:
        save_settings(database, original.with_changes({"max_line_bytes": "300"}))
        manifest = _get(service, "/api/v1/manifest/usb").json()
        with pytest.raises(SubmissionErrors, match="over this instance's limit of 300 bytes"):
            check([upload], "usb", "all", manifest)
    finally:
        save_settings(database, original)


def test_unknown_and_empty_form_fields_are_refused_not_passed_over(service, usb_fixture_dir):
    """A typo of `variant` used to leave the submission on the default board, and an empty
    `track` or `variant` took the default: both are refused, every problem named."""
    fix = usb_fixture_dir / "predictions" / "fixing_factuality.jsonl"
    before = _get(service, "/api/v1/leaderboard/usb").text

    def post(data):
        return service["client"].post(
            "/api/v1/submissions", headers=_auth(service, "alice"),
            files=[("files", ("fix.jsonl", fix.read_bytes()))], data=data)

    response = post({"model": "typo", "varaint": "cnn", "track": "", "card": ""})
    assert response.status_code == 422
    assert response.json()["errors"] == [
        {"file": None, "line": None, "field": "varaint",
         "message": "not a field of the submission form (it takes files, model, track, "
                    "variant, card, evaluate, revision, profile); did you mean 'variant'?"},
        {"file": None, "line": None, "field": "track",
         "message": "given empty: leave the field out for its default"},
        {"file": None, "line": None, "field": "card",
         "message": "given empty: leave the field out for its default"}]
    empty_model = post({"model": "", "varaint": "cnn", "track": ""})  # bound by FastAPI first
    assert empty_model.status_code == 422
    assert [(e["field"], e["message"].split(" (")[0]) for e in empty_model.json()["errors"]] == [
        ("model", "Field required"), ("varaint", "not a field of the submission form"),
        ("track", "given empty: leave the field out for its default")]
    assert _get(service, "/api/v1/leaderboard/usb").text == before


def test_a_query_parameter_given_twice_is_refused_as_a_form_field_is(service):
    """`?variant=all&variant=biographies` used to answer the last board named."""
    response = _get(service, "/api/v1/leaderboard/usb?variant=all&variant=biographies")
    assert response.status_code == 422
    assert response.json()["errors"] == [{
        "file": None, "line": None, "field": "variant",
        "message": "given more than once in the query: which value is meant is ambiguous"}]
    assert _get(service, "/api/v1/leaderboard/usb?variant=all").status_code == 200


def test_reveal_on_a_public_gold_instance_reveals_nothing_and_adds_no_private_part(
        tmp_path, data_dir):
    from leaderboard.service.admin import NOTHING_TO_REVEAL, reveal
    from leaderboard.service.app import create_app

    url = make_database(tmp_path / "public.sqlite", usb_data=data_dir, n_resamples=20,
                        open_instance=False, gold_visibility="public", computed_rows=False)
    database = Database(url)
    assert reveal(database, "root") == {"revealed": False, "changed": False,
                                        "reason": NOTHING_TO_REVEAL}
    assert not load_settings(database).revealed
    page = TestClient(create_app(url)).get("/track/usb", params={"variant": "all"}).text
    assert "Private part" not in page


def test_pages_say_yes_or_no_never_python_s_true_or_false(service, scored):
    def set_card(card: str) -> str:
        with service["database"].write_session() as session:
            submission = session.get(Submission, scored[1])
            before, submission.card = submission.card, card
        return before

    before = set_card(json.dumps({"training_data": "USB train", "usb_test_seen": False}))
    try:
        page = _get(service, f"/submission/{scored[1]}").text
        assert "<dt>usb_test_seen</dt><dd>no</dd>" in page
        for text in (page, _get(service, "/track/usb", params={"variant": "all"}).text,
                     _get(service, "/api/v1/leaderboard/usb.csv",
                          params={"variant": "all"}).text):
            assert not re.search(r"\b(True|False)\b", re.sub(r"<[^>]*>", " ", text))
    finally:
        set_card(before)


def test_the_home_page_shows_the_current_submit_flags(service):
    page = _get(service, "/").text
    assert "submit --server URL --token TOKEN --name NAME" in page and "--model NAME" not in page


def test_unknown_query_parameters_of_the_api_are_refused_not_passed_over(service,
                                                                         usb_fixture_dir):
    """A mistyped `?varaint=` used to answer the default board, and a `variant` put in a
    submission's query instead of its form left it on the default board: the API refuses
    both, naming the parameter; pages still ignore parameters they do not take."""
    response = _get(service, "/api/v1/leaderboard/usb?varaint=all&x=1")
    assert response.status_code == 422
    assert response.json() == {"status": "rejected", "errors": [
        {"file": None, "line": None, "field": "varaint",
         "message": "not a query parameter of this endpoint (it takes device, q, source, "
                    "training, variant); did you mean 'variant'?"},
        {"file": None, "line": None, "field": "x",
         "message": "not a query parameter of this endpoint (it takes device, q, source, "
                    "training, variant)"}]}
    assert _get(service, "/api/v1/leaderboard/usb.csv?variant=all").status_code == 200
    assert _get(service, "/api/v1/admin/audit?limt=5", headers=_auth(service, "admin")
                ).json()["errors"][0]["message"].endswith("(it takes limit); did you mean "
                                                          "'limit'?")
    assert _get(service, "/api/v1/submissions/1?token=abc").json()["errors"][0][
        "message"] == "not a query parameter of this endpoint (it takes none)"
    fix = usb_fixture_dir / "predictions" / "fixing_factuality.jsonl"
    before = _get(service, "/api/v1/leaderboard/usb").text
    response = service["client"].post(
        "/api/v1/submissions?variant=biographies", headers=_auth(service, "alice"),
        files=[("files", ("fix.jsonl", fix.read_bytes()))], data={"model": "query-variant"})
    assert response.status_code == 422 and response.json()["errors"][0]["field"] == "variant"
    assert _get(service, "/api/v1/leaderboard/usb").text == before
    assert _get(service, "/track/usb?utm_source=mail").status_code == 200  # a page


def test_tokens_are_required_and_stored_hashed(service):
    response = service["client"].post("/api/v1/submissions", files=[("files", ("a", b"{}"))],
                                      data={"model": "m"})
    assert response.status_code == 401
    response = service["client"].post("/api/v1/submissions", files=[("files", ("a", b"{}"))],
                                      data={"model": "m"},
                                      headers={"Authorization": "Bearer sb_wrong"})
    assert response.status_code == 401
    with service["database"].session() as session:
        hashes = [row.token_hash for row in session.scalars(select(Token))]
    assert len(hashes) >= 3 and not set(service["tokens"].values()) & set(hashes)


def _post_headers_only(service, authorizations: list[bytes], root: str = "") -> tuple:
    """POST /api/v1/submissions straight through ASGI, declaring a 10 GiB form: (status,
    headers, JSON answer, how many times the app asked for the body)."""
    import asyncio

    from leaderboard.service.app import create_app

    sent, reads = [], []

    async def receive():
        reads.append(1)
        return {"type": "http.request", "body": b"--b--\r\n", "more_body": False}

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "method": "POST", "path": root + "/api/v1/submissions",
             "headers": [(b"content-type", b"multipart/form-data; boundary=b"),
                         (b"content-length", str(10 << 30).encode())]
             + [(b"authorization", value) for value in authorizations],
             "query_string": b"", "http_version": "1.1", "scheme": "http",
             "server": ("127.0.0.1", 80), "client": ("127.0.0.1", 1), "root_path": root}
    asyncio.run(create_app(service["url"])(scope, receive, send))
    headers = {k.decode(): v.decode() for k, v in sent[0]["headers"]}
    return sent[0]["status"], headers, json.loads(sent[1]["body"]), len(reads)


def test_a_submission_without_a_valid_token_is_refused_before_its_body_is_read(service):
    """401 comes first: an anonymous client cannot make the server parse or spool an upload
    (1001 files used to get the form parser's 422, a huge body 413); behind a proxy prefix
    (root_path) as well."""
    alice = service["tokens"]["alice"].encode()
    for authorizations, root in (([], ""), ([b"Bearer sb_wrong"], ""),
                                 ([b"Basic " + alice], ""), ([], "/lb")):
        status, headers, answer, reads = _post_headers_only(service, authorizations, root)
        assert (status, headers["www-authenticate"], reads) == (401, "Bearer", 0)
        assert "script-src 'self'" in headers["content-security-policy"]
        assert answer == {"detail": "a valid API token is required (Authorization: Bearer ...)"}
    client = service["client"]
    many = client.post("/api/v1/submissions", data={"model": "many"},
                       files=[("files", (f"p{i}.jsonl", b"{}")) for i in range(1001)])
    assert many.status_code == 401
    for method in ("get", "delete"):  # other methods of the path are the router's business
        assert getattr(client, method)("/api/v1/submissions").status_code == 405


def test_two_authorization_headers_are_refused_whichever_is_valid(service):
    """The route would read the first, the token check (and a proxy) perhaps the last."""
    alice = b"Bearer " + service["tokens"]["alice"].encode()
    for authorizations in ([b"Bearer sb_wrong", alice], [alice, b"Bearer sb_wrong"]):
        status, _, answer, reads = _post_headers_only(service, authorizations)
        assert (status, answer, reads) == (
            400, {"detail": "2 Authorization headers: send one"}, 0)


@pytest.mark.slow
def test_owner_only_hide_and_delete_admin_only_rescore(service, scored, usb_fixture_dir):
    path = usb_fixture_dir / "predictions" / "multisentence_compression.jsonl"
    entry = _submit(service, [Upload("comp.jsonl", minimal_lines(path))], model="comp").json()
    service["worker"].drain()
    client = service["client"]
    assert client.post(f"/api/v1/submissions/{entry['id']}/hide",
                       headers=_auth(service, "bob")).status_code == 403
    assert client.post(f"/api/v1/submissions/{entry['id']}/hide",
                       headers=_auth(service, "alice")).status_code == 200
    ids = [e["id"] for e in _get(service, "/api/v1/leaderboard/usb").json()["entries"]]
    assert entry["id"] not in ids
    assert _get(service, f"/api/v1/submissions/{entry['id']}").status_code == 404
    assert _get(service, f"/api/v1/submissions/{entry['id']}",
                headers=_auth(service, "alice")).json()["hidden"] is True
    assert client.delete(f"/api/v1/submissions/{entry['id']}",
                         headers=_auth(service, "bob")).status_code == 403
    assert client.delete(f"/api/v1/submissions/{entry['id']}",
                         headers=_auth(service, "admin")).status_code == 200
    assert _get(service, f"/api/v1/submissions/{entry['id']}",
                headers=_auth(service, "alice")).status_code == 404
    assert client.post("/api/v1/admin/rescore", headers=_auth(service, "alice")).status_code == 403
    assert client.post("/api/v1/admin/rescore", headers=_auth(service, "admin")).json() == {
        "score": 0, "analyse": 0, "evaluate": 0}
    assert client.get("/api/v1/admin/audit", headers=_auth(service, "alice")).status_code == 403
    assert client.get("/api/v1/admin/audit").status_code == 401
    audit = client.get("/api/v1/admin/audit", headers=_auth(service, "admin")).json()
    actions = [(row["actor"], row["action"]) for row in audit["entries"]]
    assert ("admin", "delete") in actions and ("alice", "hide") in actions


def test_rejected_submissions_count_toward_an_hourly_limit(service, usb_fixture_dir):
    """Bad files cost the server work whether or not they are stored: past
    `rejected_per_hour`, a user's next submissions are refused unread (429), good ones too;
    the refusals count toward nothing (audited as refused), and other users are unaffected."""
    from sqlalchemy import select

    from leaderboard.service.db import AuditEntry

    database, original = service["database"], load_settings(service["database"])
    token = create_token(database, "erin")
    service["tokens"]["erin"] = token
    good = [Upload("fix.jsonl", minimal_lines(
        usb_fixture_dir / "predictions" / "fixing_factuality.jsonl"))]
    try:
        save_settings(database, original.with_changes({"rejected_per_hour": "3"}))
        for number in range(3):
            bad = _submit(service, [Upload("bad.jsonl", b"{not json\n")], model=f"bad {number}",
                          user="erin")
            assert bad.status_code == 422, bad.text
        for _ in range(2):
            refused = _submit(service, good, model="good after bad ones", user="erin")
            assert refused.status_code == 429, refused.text
            assert refused.json()["errors"][0]["message"].startswith(
                "3 rejected submissions in the last hour")
        evaluation = service["client"].post("/api/v1/submissions", headers=_auth(
            service, "erin"), data={"model": "evaluated", "evaluate": "team/none"})
        assert evaluation.status_code == 429, evaluation.text
        service["tokens"]["frank"] = create_token(database, "frank")
        assert _submit(service, good, model="another user", user="frank").status_code == 202
        with database.session() as session:
            outcomes = [row.outcome for row in session.scalars(
                select(AuditEntry).where(AuditEntry.actor == "erin", AuditEntry.action == "submit")
                .order_by(AuditEntry.id))]
        assert outcomes == ["rejected"] * 3 + ["refused"] * 3
    finally:
        save_settings(database, original)


@pytest.mark.slow
def test_quota_and_body_limit(service, usb_fixture_dir):
    from leaderboard.service.app import create_app

    database = service["database"]
    original = load_settings(database)
    path = usb_fixture_dir / "predictions" / "fixing_factuality.jsonl"
    upload = [Upload("fix.jsonl", minimal_lines(path))]
    try:
        save_settings(database, original.with_changes({"quota_per_day": "1"}))
        response = _submit(service, upload, model="over quota", user="bob")
        assert response.status_code == 202
        response = _submit(service, upload, model="over quota 2", user="bob")
        assert response.status_code == 429 and "quota" in response.json()["errors"][0]["message"]
        assert _submit(service, upload, model="admin is unlimited", user="admin").status_code \
            in (202,)
        save_settings(database, original.with_changes({"max_upload_bytes": "2000"}))
        small = TestClient(create_app(service["url"]))
        response = small.post("/api/v1/submissions", headers=_auth(service, "alice"),
                              files=[("files", ("big.jsonl", b"x" * (3 << 20)))],
                              data={"model": "big"})
        assert response.status_code == 413
        assert "uploads may total 2000 bytes" in response.json()["errors"][0]["message"]
        chunks = iter([b"x" * (1 << 20)] * 3)  # no Content-Length: the body is streamed
        response = small.post("/api/v1/submissions", headers={
            **_auth(service, "alice"), "content-type": "multipart/form-data; boundary=b"},
            content=chunks)
        assert response.status_code == 413, response.text
        response = small.post("/api/v1/submissions", headers=_auth(service, "alice"),
                              files=[("files", ("a.jsonl", b"x" * 3000))], data={"model": "m"})
        assert response.status_code == 422  # under the body limit, over the upload limit
        assert "over this instance's limit of 2000" in response.json()["errors"][0]["message"]
    finally:
        save_settings(database, original)
        service["worker"].drain()


@pytest.mark.slow
def test_concurrent_submissions_cannot_pass_the_quota_together(service, usb_fixture_dir):
    """The quota is counted again in the transaction that stores the submission."""
    from concurrent.futures import ThreadPoolExecutor

    from leaderboard.service.app import create_app

    database = service["database"]
    original = load_settings(database)
    token = create_token(database, "carol")
    path = usb_fixture_dir / "predictions" / "fixing_factuality.jsonl"
    files = _files([Upload("fix.jsonl", minimal_lines(path))])

    def post(number):
        with TestClient(create_app(service["url"])) as client:
            return client.post("/api/v1/submissions", files=files, data={
                "model": f"race {number}"}, headers={"Authorization": f"Bearer {token}"})
    try:
        save_settings(database, original.with_changes({"quota_per_day": "3"}))
        with ThreadPoolExecutor(8) as pool:
            codes = sorted(response.status_code for response in pool.map(post, range(8)))
        assert codes == [202] * 3 + [429] * 5
    finally:
        save_settings(database, original)
        service["worker"].drain()


def test_audit_log_is_append_only(service):
    with pytest.raises(RuntimeError, match="append-only"):
        with service["database"].session() as session:
            row = session.scalars(select(AuditEntry)).first()
            row.outcome = "tampered"


@pytest.mark.slow
def test_rescore_after_a_gold_change_keeps_history(tmp_path, data_dir, usb_fixture_dir):
    from leaderboard.service.auth import authenticate
    from leaderboard.service.entry_view import public_view
    from leaderboard.service.init import initialise
    from leaderboard.service.submissions import accept
    from leaderboard.service.worker import queue_rescore

    gold = tmp_path / "gold"
    shutil.copytree(data_dir, gold)
    url = make_database(tmp_path / "lb.sqlite", usb_data=gold, n_resamples=20,
                        computed_rows=False)
    database = Database(url)
    user = authenticate(database, create_token(database, "carol"))
    entry = accept(database, load_settings(database), user, track_name="usb", board="all",
                   model="m", card={}, uploads=fixture_uploads(usb_fixture_dir,
                                                               {"fixing_factuality"}))
    Worker(database).drain()
    first = public_view(database, entry["id"])
    target = gold / "all" / "fixing_factuality" / "test.jsonl"
    records = [json.loads(line) for line in target.read_text().splitlines()]
    records[0]["fixed_summary"] = "An entirely different correction."
    target.write_text("".join(json.dumps(r) + "\n" for r in records))
    report = initialise(str(tmp_path / "lb.sqlite"), gold=str(gold))
    assert {"track": "usb", "board": "all", "part": "fixing_factuality",
            "change": "replaced"} in report["gold"]
    from leaderboard.service.boards import read_board
    assert read_board(database, "usb", "all")[0]["partial"] == []  # old version not shown
    assert queue_rescore(database) == {"score": 1, "analyse": 0, "evaluate": 0}
    Worker(database).drain()
    second = public_view(database, entry["id"])
    assert second["headlines"]["fixing_factuality"] < first["headlines"]["fixing_factuality"]
    with database.session() as session:
        rows = session.scalars(select(Score).filter_by(submission_id=entry["id"])
                               .order_by(Score.id)).all()
    assert [row.current for row in rows] == [False, True]
    assert rows[0].version_key != rows[1].version_key


def _evaluators_entries(database) -> dict[str, tuple[str, list]]:
    """model -> (track version, each part's stored distribution, NaN as None) of the
    evaluators board's current scores."""
    import numpy as np

    from leaderboard.service.db import Material

    found = {}
    with database.session() as session:
        for submission in session.scalars(select(Submission).filter_by(track="evaluators")):
            score = session.scalars(select(Score).filter_by(submission_id=submission.id,
                                                            current=True)).one()
            materials = session.scalars(select(Material).filter_by(score_id=score.id)
                                        .order_by(Material.part)).all()
            found[submission.model] = (json.loads(score.versions)["track_version"], [
                [None if np.isnan(v) else v for v in np.frombuffer(m.distribution)]
                for m in materials])
    return found


@pytest.mark.slow
def test_rescore_recomputes_the_evaluators_entries_of_the_first_track_version(tmp_path,
                                                                              monkeypatch):
    """Entries scored under the evaluators track's version 1 (examples resampled only) are
    not current after the upgrade to version 2; the admin's rescore on the served board scores
    them again: version 2's boot-both distributions, equal to a board built anew, and the
    version-1 rows kept as history."""
    from leaderboard.service.app import create_app
    from leaderboard.service.db import Material
    from leaderboard.tracks.evaluators import EvaluatorsTrack

    pyramid = write_pyramid_folder(tmp_path / "tinyset")
    with monkeypatch.context() as first_version:
        first_version.setattr(EvaluatorsTrack, "version", "1")
        url = make_database(tmp_path / "old.sqlite", pyramid=pyramid, n_resamples=20)
    database = Database(url)
    old = _evaluators_entries(database)
    assert len(old) >= 5 and {version for version, _ in old.values()} == {"1"}
    with database.write_session() as session:  # version 1's numbers stand for themselves
        for material in session.scalars(select(Material)):
            material.distribution = bytes(len(material.distribution))
    new = _evaluators_entries(Database(make_database(tmp_path / "new.sqlite", pyramid=pyramid,
                                                     n_resamples=20)))
    assert {version for version, _ in new.values()} == {"2"} and set(new) == set(old)
    client = TestClient(create_app(url))
    admin = {"Authorization": f"Bearer {create_token(database, 'admin', admin=True)}"}
    answer = client.post("/api/v1/admin/rescore", headers=admin)
    assert answer.json() == {"score": len(old), "analyse": 0, "evaluate": 0}
    Worker(database).drain()
    assert _evaluators_entries(database) == new
    with database.session() as session:
        history = [json.loads(score.versions)["track_version"]
                   for score in session.scalars(select(Score).order_by(Score.id))
                   if not score.current]
    assert history == ["1"] * len(old)
    board = client.get("/api/v1/leaderboard/evaluators", params={"variant": "tinyset"}).json()
    assert "significance clusters" in board["rules"]["bands"]


@pytest.mark.slow
def test_breakdown_aggregates_the_scored_material_and_rescores_after_a_gold_change(
        tmp_path, data_dir, usb_fixture_dir):
    from leaderboard.intake.validate import Limits, validate_submission
    from leaderboard.service.auth import authenticate
    from leaderboard.service.entry_view import public_view
    from leaderboard.service.init import initialise
    from leaderboard.service.submissions import accept
    from leaderboard.tracks import make_track

    gold = tmp_path / "gold"
    shutil.copytree(data_dir, gold)
    database = Database(make_database(tmp_path / "lb.sqlite", usb_data=gold, n_resamples=20,
                                      computed_rows=False, min_public_items=1))
    user = authenticate(database, create_token(database, "dora"))
    uploads = fixture_uploads(usb_fixture_dir, {"fixing_factuality"})
    track = make_track("usb")

    def breakdown_on_gold_now():  # every domain's records scored again on the gold on disk
        gold_now = track.load_gold(str(gold))
        checked = validate_submission(track, uploads, track.manifest(gold_now, "all"),
                                      Limits(), "all").checked
        return json.loads(json.dumps(track.breakdown(checked, gold_now, "all")))

    def submit(model):
        return accept(database, load_settings(database), user, track_name="usb", board="all",
                      model=model, card={}, uploads=uploads)["id"]

    first = submit("m1")
    assert Worker(database).drain() == 2
    before = public_view(database, first)["breakdown"]
    assert before == breakdown_on_gold_now()
    second = submit("m2")
    assert Worker(database).run_once()  # scored; its analysis waits
    target = gold / "all" / "fixing_factuality" / "test.jsonl"
    records = [json.loads(line) for line in target.read_text().splitlines()]
    records[0]["fixed_summary"] = "An entirely different correction."
    target.write_text("".join(json.dumps(r) + "\n" for r in records))
    initialise(str(tmp_path / "lb.sqlite"), gold=str(gold), computed_rows=False)  # drains
    with database.session() as session:
        stale = session.scalars(select(Score).filter_by(submission_id=second)).one()
    # its analysis ran after the change: the material scored on the old gold is not read
    # against the new one; the rescore scores and analyses it again
    assert (stale.analysed, stale.breakdown) == (False, None)
    from leaderboard.service.worker import queue_rescore
    assert queue_rescore(database)["score"] == 2
    Worker(database).drain()
    with database.session() as session:
        current = session.scalars(select(Score).filter_by(submission_id=second, current=True)
                                  ).one()
    assert json.loads(current.breakdown) == breakdown_on_gold_now() != before


@pytest.mark.slow
def test_full_session_and_export_never_hold_gold(service, scored, data_dir, tmp_path):
    from leaderboard.service.export import export_site

    for url in ("/", "/track/usb?variant=all",
                "/track/summaries?variant=tinyset", "/track/evaluators?variant=tinyset",
                "/api/v1/leaderboard/usb", "/api/v1/leaderboard/usb.csv",
                "/api/v1/manifest/usb", f"/submission/{scored[0]}",
                f"/api/v1/submissions/{scored[0]}", f"/api/v1/submissions/{scored[1]}",
                f"/compare?a={scored[0]}&b=1", "/api/v1/openapi.json",
                "/track/usb/task/fixing_factuality?variant=all",
                "/track/usb/task/factuality_classification?variant=all",
                "/track/summaries/task/tinyset?variant=tinyset"):
        assert _get(service, url).status_code == 200, url
    for entry in scored:  # item pages: never where the gold is hidden
        for task in ("fixing_factuality", "factuality_classification"):
            assert _get(service, f"/items/{entry}?task={task}&b=1").status_code == 404
    counts = export_site(service["database"], tmp_path / "site")
    assert counts["boards"] == 3 and counts["entries"] >= 3 and counts["compare"] >= 1
    assert counts["tasks"] == 8 + 1 + 1
    exported = [path.read_bytes() for path in (tmp_path / "site").rglob("*") if path.is_file()]
    assert (tmp_path / "site" / "track-usb-all.html").is_file()
    assert (tmp_path / "site" / "chart-usb-all.png").read_bytes().startswith(b"\x89PNG")
    secrets = gold_strings(data_dir)
    assert len(secrets) >= 10
    per_item = per_item_scores(service["database"])
    assert len(per_item) > 20
    for body in service["responses"] + exported:
        text = body.decode("utf-8", errors="replace")
        assert not [s for s in secrets if s in text]
        assert not [v for v in per_item
                    if re.search(r"(?<![\d.])" + re.escape(v) + r"(?!\d)", text)]


def per_item_scores(database) -> set[str]:
    """Per-item test scores (ROUGE of one record) as they would be printed, leaving out
    simple fractions k/n (n <= 30) that an aggregate can equal by chance."""
    from fractions import Fraction

    from leaderboard.service.db import Material, unpack

    values = set()
    with database.session() as session:
        for material in session.scalars(select(Material)):
            for item in unpack(material.examples):
                if isinstance(item, dict):
                    values.update(v for v in item.values() if isinstance(v, float) and 0 < v < 1)
    return {repr(v) for v in values
            if Fraction(v).limit_denominator(30) != Fraction(v) and
            abs(float(Fraction(v).limit_denominator(30)) - v) > 1e-12}


def test_migrations_build_exactly_the_models_schema(tmp_path):
    from leaderboard.service.schema import check_schema, head_revision, migrate, schema_differences
    from tasks.plumbing.errors import SumbenchError

    database = Database(str(tmp_path / "fresh.sqlite"))
    with pytest.raises(SumbenchError, match="revision none"):
        check_schema(database)
    assert migrate(database) == head_revision() == "0005"
    assert schema_differences(database) == []
    assert migrate(database) == "0005"  # a second run changes nothing
    from sqlalchemy import text
    with database.session() as session:
        assert session.execute(text("PRAGMA journal_mode")).scalar() == "wal"


@pytest.mark.slow
def test_a_write_by_a_request_while_the_worker_claims_a_submission_costs_no_retry(
        tmp_path, data_dir, usb_fixture_dir, monkeypatch):
    """A request writes (an audit row) while the worker is inside its claiming transaction:
    the worker's first attempt still scores (on SQLite a read transaction that then writes
    fails once another connection has written since it began)."""
    import threading

    import leaderboard.service.scoring_jobs as worker_module
    from leaderboard.service.auth import audit
    from leaderboard.service.entry_view import public_view

    database, _, submission_id = scored_fix_submission(tmp_path, data_dir, usb_fixture_dir,
                                                       score=False)
    written = threading.Event()

    def request_writes():
        with database.write_session() as session:
            audit(session, "erin", "hide", "accepted", submission_id=submission_id)
        written.set()

    real_unpack = worker_module.unpack

    def unpack_while_a_request_writes(blob):
        writer = threading.Thread(target=request_writes)
        writer.start()
        written.wait(timeout=1.0)  # the worker's transaction holds the write lock: it waits
        return real_unpack(blob)

    monkeypatch.setattr(worker_module, "unpack", unpack_while_a_request_writes)
    assert Worker(database).run_once()
    monkeypatch.setattr(worker_module, "unpack", real_unpack)
    assert written.wait(timeout=60)  # the request's write went through after the claim
    with database.session() as session:
        job = session.scalars(select(worker_module.Job).filter_by(
            submission_id=submission_id, kind="score")).one()
        assert (job.state, job.attempts, job.error) == ("done", 1, None)
    assert public_view(database, submission_id)["status"] == "scored"
