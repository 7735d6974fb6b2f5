"""Leaderboard tracks: the usb join equals `sumbench score`, the validator's errors, the
summaries and evaluators tracks on real and tiny Pyramid data, published rows and charts."""
from __future__ import annotations

import json

import pytest

from leaderboard.charts import chart_bars, task_bar_chart
from leaderboard.intake.validate import Limits, Upload, validate_submission
from leaderboard.published import PUBLISHED_BADGE, published_usb_rows
from leaderboard.tracks import SubmissionErrors, make_track
from leaderboard.tracks.evaluators import builtin_metric_records
from tasks import task_names
from tasks.scoring import score_files

from lb_helpers import SYSTEMS, minimal_lines, write_pyramid_folder


@pytest.fixture(scope="module")
def usb(data_dir):
    track = make_track("usb")
    return track, track.load_gold(str(data_dir))


def _check(track, gold, uploads, board="all"):
    return validate_submission(track, uploads, track.manifest(gold, board), Limits(), board)


def _uploads(usb_fixture_dir, names=None, transform=minimal_lines):
    return [Upload(path.name, transform(path))
            for path in sorted((usb_fixture_dir / "predictions").glob("*.jsonl"))
            if names is None or path.stem in names]


def test_join_of_minimal_records_scores_exactly_like_sumbench_score(usb, usb_fixture_dir):
    track, gold = usb
    checked = _check(track, gold, _uploads(usb_fixture_dir)).checked
    parts = track.score(checked, gold, "all")
    expected = score_files(sorted((usb_fixture_dir / "predictions").glob("*.jsonl")))
    assert sorted(parts) == sorted(expected) == task_names("usb")
    for name, part in parts.items():
        for key, value in expected[name].items():
            if isinstance(value, float):
                assert part.result[key] == pytest.approx(value, abs=1e-12), (name, key)
            else:
                assert part.result[key] == value
        assert part.headline == expected[name]["headline"]


def test_gold_fields_in_submitted_files_are_ignored(usb, usb_fixture_dir):
    track, gold = usb

    def poisoned(path):
        lines = []
        for line in path.read_text().splitlines():
            record = json.loads(line)
            for key in ("output_string", "labels", "label", "annotated_summary"):
                if key in record:
                    record[key] = "forged" if isinstance(record[key], str) else [1, 1]
            lines.append(json.dumps(record))
        return ("\n".join(lines) + "\n").encode()
    clean = track.score(_check(track, gold, _uploads(usb_fixture_dir)).checked, gold, "all")
    forged = track.score(_check(track, gold, _uploads(usb_fixture_dir, transform=poisoned)
                                ).checked, gold, "all")
    assert {k: v.result for k, v in clean.items()} == {k: v.result for k, v in forged.items()}


def test_manifest_holds_keys_and_lengths_only_sorted_not_in_gold_order(usb):
    track, gold = usb
    manifest = track.manifest(gold, "all")
    fac = manifest["parts"]["factuality_classification"]
    assert set(fac[0]) == {"id", "summ_idx", "summary_sent_sha256", "n"} and fac[0]["n"] == 1
    keys = [(i["id"], i["summ_idx"], i["summary_sent_sha256"]) for i in fac]
    assert keys == sorted(keys)
    labels = [t["label"] for t in gold["all"]["factuality_classification"]["templates"]]
    assert labels[:2] == [0, 1]  # gold order would give the label away; the manifest is sorted
    ext = manifest["parts"]["extractive_summarization"][0]
    assert set(ext) == {"id", "n"} and ext["n"] > 1
    text = json.dumps(manifest)
    assert "output_string" not in text and "labels" not in text and "input_lines" not in text
    claims = [t["summary_sent"] for t in gold["all"]["factuality_classification"]["templates"]]
    assert not [claim for claim in claims if claim in text]  # FAC claims are FIX references


@pytest.mark.parametrize("edit, message, field", [
    (lambda rs: rs[:-1], "1 of 3 test items missing", "id"),
    (lambda rs: rs + rs[:1], "duplicate record", "id"),
    (lambda rs: rs + [{**rs[0], "id": "nowhere/doc.json"}], "no such test item", "id"),
    (lambda rs: [{**rs[0], "prediction": 3}] + rs[1:], "expected a string, got integer",
     "prediction"),
    (lambda rs: [{k: v for k, v in rs[0].items() if k != "id"}] + rs[1:], "missing field", "id"),
    (lambda rs: [{**rs[0], "id": ["a"]}] + rs[1:], "expected a string, got array", "id"),
    (lambda rs: [{**rs[0], "task": "ABSTRACTIVE"}] + rs[1:], "unknown task", "task"),
])
def test_abs_submission_errors_name_file_line_and_field(usb, usb_fixture_dir, edit, message,
                                                         field):
    track, gold = usb
    path = usb_fixture_dir / "predictions" / "abstractive_summarization.jsonl"
    records = [json.loads(line) for line in minimal_lines(path).decode().splitlines()]
    data = "".join(json.dumps(r) + "\n" for r in edit(records)).encode()
    with pytest.raises(SubmissionErrors) as caught:
        _check(track, gold, [Upload("abs.jsonl", data)])
    first = caught.value.to_list()[0]
    assert message in first["message"] and first["field"] == field
    if "missing" not in message:
        assert first["file"] == "abs.jsonl" and isinstance(first["line"], int)


@pytest.mark.parametrize("summ_idx, message", [
    (-1, "expected a non-negative integer below 2**63, got -1"),
    (True, "expected a non-negative integer below 2**63, got true"),
    (None, "expected a non-negative integer below 2**63, got null"),
])
def test_item_ids_are_checked_as_sumbench_score_checks_them(summ_idx, message):
    from leaderboard.tracks.base import ErrorCollector, check_id_types

    errors = ErrorCollector()
    record = {"id": "d", "summ_idx": summ_idx}
    assert not check_id_types(errors, ("fac.jsonl", 4, record), ("id", "summ_idx"))
    (error,) = errors.errors
    assert (error.path, error.line, error.field, error.reason) == \
        ("fac.jsonl", 4, "summ_idx", message)
    assert check_id_types(errors, ("fac.jsonl", 5, dict(record, summ_idx=0)),
                          ("id", "summ_idx")) and len(errors.errors) == 1


def test_probability_lengths_fac_ids_and_board_tasks(usb, usb_fixture_dir):
    track, gold = usb
    ext = usb_fixture_dir / "predictions" / "extractive_summarization.jsonl"
    records = [json.loads(line) for line in minimal_lines(ext).decode().splitlines()]
    records[1]["prediction"] = records[1]["prediction"][:-1]
    with pytest.raises(SubmissionErrors, match="expected 11 probabilities, got 10"):
        _check(track, gold, [Upload("ext.jsonl", "".join(json.dumps(r) + "\n"
                                                          for r in records).encode())])
    fac = usb_fixture_dir / "predictions" / "factuality_classification.jsonl"
    stripped = [{k: v for k, v in json.loads(line).items() if k != "summary_sent"}
                for line in fac.read_text().splitlines()]
    with pytest.raises(SubmissionErrors, match="missing field") as caught:
        _check(track, gold, [Upload("fac.jsonl", "".join(json.dumps(r) + "\n"
                                                          for r in stripped).encode())])
    assert caught.value.to_list()[0]["field"] == "summary_sent"
    only_abs = {"companies": {"abstractive_summarization":
                              gold["companies"]["abstractive_summarization"]}}
    with pytest.raises(SubmissionErrors, match="factuality_classification has no test gold "
                                               "on board 'companies'"):
        _check(track, only_abs, [Upload("fac.jsonl", minimal_lines(fac))], board="companies")


def test_subset_of_tasks_and_breakdown_by_domain(usb, usb_fixture_dir):
    track, gold = usb
    checked = _check(track, gold, _uploads(usb_fixture_dir, {"fixing_factuality"})).checked
    assert list(checked) == ["fixing_factuality"]
    breakdown = track.breakdown(checked, gold, "all")
    domains = {path.split("/")[0] for path in
               (t["id"] for t in gold["all"]["fixing_factuality"]["templates"])}
    assert set(breakdown) == domains
    total = sum(v["fixing_factuality"]["n_records"] for v in breakdown.values())
    assert total == len(gold["all"]["fixing_factuality"]["templates"])


def test_breakdown_from_stored_material_equals_scoring_each_domain_again(usb, usb_fixture_dir):
    from leaderboard.service.db import pack, unpack
    from tasks import get_task
    from tasks.scoring import score_task_examples

    track, gold = usb
    checked = _check(track, gold, _uploads(usb_fixture_dir)).checked
    stored = {name: unpack(pack(part.material))  # as the worker reads it back
              for name, part in track.score(checked, gold, "all").items()}
    from_material = track.breakdown(checked, gold, "all", stored)
    assert from_material == track.breakdown(checked, gold, "all")  # rescoring every record
    for name in task_names("usb"):
        joined = track.joined_records(name, checked[name], gold, "all")
        domains = sorted({str(record["id"]).split("/")[0] for record in joined})
        for domain in domains:
            subset = [r for r in joined if str(r["id"]).split("/")[0] == domain]
            result, _ = score_task_examples(get_task(name), subset, report=False)
            assert from_material[domain][name] == result, (domain, name)
    wrong_length = {**stored, "fixing_factuality": stored["fixing_factuality"][:-1]}
    assert track.breakdown(checked, gold, "all", wrong_length) == from_material  # rescored


def test_shape_only_check_without_manifest(usb, usb_fixture_dir):
    track, _ = usb
    result = validate_submission(track, _uploads(usb_fixture_dir), None, Limits(), "all")
    assert result.n_records == sum(len(v) for v in result.checked.values())
    twice = _uploads(usb_fixture_dir, {"fixing_factuality"}) * 2
    with pytest.raises(SubmissionErrors, match="duplicate record"):
        validate_submission(track, twice, None, Limits(), "all")


# ---- summaries and evaluators ----------------------------------------------------------------
@pytest.fixture(scope="module")
def tiny_pyramid(tmp_path_factory):
    return write_pyramid_folder(tmp_path_factory.mktemp("pyr") / "tinyset", qas=True)


def test_summaries_track_scores_human_systems_and_orders_them(tiny_pyramid):
    track = make_track("summaries")
    gold = track.load_gold([str(tiny_pyramid)])
    assert list(gold) == ["tinyset"]
    payload = gold["tinyset"]["tinyset"]
    results = {}
    for system in SYSTEMS:
        lines = [{"dataset": "tinyset", "id": i, "summary": s}
                 for i, s in zip(payload["ids"], payload["summaries"][system])]
        checked = track.check([("f", n, r) for n, r in enumerate(lines, 1)],
                              track.manifest(gold, "tinyset"))
        results[system] = track.score(checked, gold, "tinyset")["tinyset"].result
    assert results["alpha"]["pyramid-scus-lexical"] == 1.0
    assert results["alpha"]["headline"] > results["beta"]["headline"] > results["gamma"]["headline"]
    assert "qapyramid-lexical" in results["alpha"]
    humans = track.reference_systems(gold, "tinyset")
    assert humans["beta"]["human"] == pytest.approx(2 / 3)


def test_summaries_validation(tiny_pyramid):
    track = make_track("summaries")
    gold = track.load_gold([str(tiny_pyramid)])
    manifest = track.manifest(gold, "tinyset")
    lines = [("s.jsonl", 1, {"dataset": "other", "id": "ex00", "summary": "x"}),
             ("s.jsonl", 2, {"dataset": "tinyset", "id": "ex00", "summary": ""}),
             ("s.jsonl", 3, {"dataset": "tinyset", "id": 5, "summary": "x"})]
    with pytest.raises(SubmissionErrors) as caught:
        track.check(lines, manifest)
    fields = [(e["line"], e["field"]) for e in caught.value.to_list()]
    assert fields[:3] == [(1, "dataset"), (2, "summary"), (3, "id")]


@pytest.mark.slow
def test_evaluators_track_reproduces_realsumm_rouge2_meta_evaluation(pyramid_data_dir):
    from tasks.metrics.recall import rouge_recall_by_system

    track = make_track("evaluators")
    gold = track.load_gold([str(pyramid_data_dir / "realsumm")])
    payload = gold["realsumm"]["realsumm"]
    recall = rouge_recall_by_system(payload["summaries"], payload["references"])
    lines = [{"dataset": "realsumm", "system": system, "id": example_id, "score": value}
             for system, values in recall["rouge2_recall"].items()
             for example_id, value in zip(payload["ids"], values)]
    checked = track.check([("r2", n, r) for n, r in enumerate(lines, 1)],
                          track.manifest(gold, "realsumm"))
    result = track.score(checked, gold, "realsumm")["realsumm"].result
    assert result["system_kendall"] == pytest.approx(0.833, abs=5e-4)
    assert result["system_pearson"] == pytest.approx(0.964, abs=5e-4)
    assert result["summary_kendall"] == pytest.approx(0.358, abs=5e-4)
    assert result["headline"] == pytest.approx(100 * result["system_kendall"])
    # its bootstrap distribution resamples the systems and the examples (boot-both), with
    # the board's draws: each value is the system-level Kendall tau of one resample
    import numpy as np

    from tasks.metrics.resampling import bootstrap_draws, correlate

    material = track.score(checked, gold, "realsumm")["realsumm"].material
    values = track.distribution("realsumm", gold, "realsumm", material, n_resamples=8, seed=5)
    X = np.array([item["metric"] for item in material]).T
    Z = np.array([item["human"] for item in material]).T
    draws = bootstrap_draws(np.random.default_rng([5, 0, 0]), Z.shape, "both", 8)
    assert values == pytest.approx([100 * correlate(X[r][:, c], Z[r][:, c], "system",
                                                    "kendall") for r, c in draws], abs=1e-10)
    assert "significance clusters" in track.band_rule(8, 0.05, 5)
    assert "the systems and the examples" in track.band_rule(8, 0.05, 5)
    human = make_track("summaries").reference_systems(gold, "realsumm")
    # the mean of the system's human scores (summation order may differ in the last bit)
    assert human["abs_bart_out"]["human"] == pytest.approx(0.48349483849483854, rel=1e-14)


def test_builtin_evaluators_rank_the_copying_system_first(tiny_pyramid):
    track = make_track("evaluators")
    gold = track.load_gold([str(tiny_pyramid)])
    builtin = builtin_metric_records(gold["tinyset"]["tinyset"])
    assert set(builtin) == {"rouge1-recall", "rouge2-recall", "rougeL-recall",
                            "lexical-pyramid-scus", "lexical-pyramid-stus",
                            "lexical-pyramid-sentences", "lexical-pyramid-qas"}
    checked = track.check([("b", n, r) for n, r in enumerate(builtin["lexical-pyramid-scus"],
                                                             1)], track.manifest(gold, "tinyset"))
    result = track.score(checked, gold, "tinyset")["tinyset"].result
    assert result["system_kendall"] == pytest.approx(1.0) and result["headline"] == 100.0


def test_evaluators_validation_needs_finite_scores_for_every_pair(tiny_pyramid):
    track = make_track("evaluators")
    gold = track.load_gold([str(tiny_pyramid)])
    manifest = track.manifest(gold, "tinyset")
    lines = [("m.jsonl", 1, {"dataset": "tinyset", "system": "alpha", "id": "ex00",
                             "score": float("nan")})]
    with pytest.raises(SubmissionErrors) as caught:
        track.check(lines, manifest)
    errors = caught.value.to_list()
    assert errors[0]["field"] == "score" and "finite" in errors[0]["message"]
    assert errors[1]["message"] == (
        "tinyset: 36 of 36 test items missing (first: system='alpha', id='ex00'); 1 rejected "
        "record of this part above may be among them")


def test_a_record_with_a_bad_summ_idx_is_named_as_a_possible_missing_item(usb, usb_fixture_dir):
    track, gold = usb
    path = usb_fixture_dir / "predictions" / "factuality_classification.jsonl"
    records = [json.loads(line) for line in minimal_lines(path).decode().splitlines()]
    data = "".join(json.dumps(r) + "\n" for r in [{**records[0], "summ_idx": -1},
                                                   *records[1:]]).encode()
    with pytest.raises(SubmissionErrors) as caught:
        _check(track, gold, [Upload("fac.jsonl", data)])
    bad_id, missing = caught.value.to_list()
    assert (bad_id["file"], bad_id["line"], bad_id["field"]) == ("fac.jsonl", 1, "summ_idx")
    assert missing["message"].startswith(f"factuality_classification: 1 of {len(records)} test "
                                         f"items missing") and missing["message"].endswith(
        "; 1 rejected record of this part above may be among them")
    for kept in (records[1:], [records[0], *records[2:], records[0]]):  # left out; or left
        data = "".join(json.dumps(r) + "\n" for r in kept).encode()   # out with a duplicate
        with pytest.raises(SubmissionErrors) as caught:
            _check(track, gold, [Upload("fac.jsonl", data)])
        assert [e["message"] for e in caught.value.to_list()
                if "missing" in e["message"]][0].endswith(")")  # a duplicate is no candidate


def test_published_rows_cover_the_eight_tasks():
    rows = published_usb_rows()
    assert [row["model"] for row in rows] == ["Flan-T5-Large", "Flan-T5-XL",
                                              "Flan-T5-XL multitask", "GPT-3.5-turbo"]
    assert all(set(row["headlines"]) == set(task_names("usb")) for row in rows)
    assert rows[0]["headlines"]["factuality_classification"] == 95.15
    assert rows[3]["headlines"]["unsupported_span_prediction"] == 7.80
    assert all(row["badge"] == PUBLISHED_BADGE for row in rows)


def test_chart_is_deterministic_and_never_draws_missing_values_as_zero():
    rows = [{"label": "a", "values": {"x": 50.0, "y": None}, "ci95": {"x": [40.0, 60.0]}},
            {"label": "<b>", "values": {"x": 30.0, "y": 20.0}, "ci95": {}}]
    bars = chart_bars(rows, ["x", "y"])
    assert [(b["row"], b["part"], b["value"]) for b in bars] == [(0, 0, 50.0), (1, 0, 30.0),
                                                                 (1, 1, 20.0)]
    png = task_bar_chart(rows, ["x", "y"], title="t")
    drawn_anew = task_bar_chart.__wrapped__(rows, ["x", "y"], title="t")  # past the kept ones
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and png == drawn_anew


def test_a_chart_asked_for_again_is_the_kept_one_and_new_contents_are_drawn():
    """A board is rebuilt after every score and analysis: a chart whose contents did not
    change is the bytes drawn before; any change in a value, an interval or the title draws
    again."""
    rows = [{"label": "kept", "values": {"x": 41.5}, "ci95": {"x": [40.0, 43.0]}}]
    before = task_bar_chart.cache_info()
    first = task_bar_chart(rows, ["x"], title="kept chart")
    again = task_bar_chart([dict(row) for row in rows], ("x",), title="kept chart")
    after = task_bar_chart.cache_info()
    assert again == first and (after.hits, after.misses) == (before.hits + 1, before.misses + 1)
    changed = [{**rows[0], "ci95": {"x": [39.0, 43.0]}}]
    assert task_bar_chart(changed, ["x"], title="kept chart") != first
    assert task_bar_chart(rows, ["x"], title="kept chart 2") != first
    assert task_bar_chart.cache_info().misses == before.misses + 3


@pytest.mark.parametrize("written, units", [
    ("qa", "qas"), ("qas", "qas"), ("scu", "scus"), ("stu", "stus"), ("ssus", "ssus"),
    ("sentences", "sentences"),
])
def test_a_column_takes_any_spelling_of_its_unit_kind(written, units):
    """`qa` is `qas` and `scu` is `scus` (the presence commands' singular spellings), kept as
    the board spells the kind; `ssus` (a units file's sentences) stays its own column."""
    from leaderboard.tracks.summaries import SummariesEvaluator

    column = SummariesEvaluator.parse(f"x={written}:lexical").check()
    assert column.units == units
    assert column == SummariesEvaluator.from_dict(column.to_dict())


def test_summaries_track_with_a_configured_nli_evaluator(tiny_pyramid, tmp_path):
    """An instance may configure model-based presence (here a tiny local NLI classifier):
    the track's score equals `sumbench pyramid`'s evaluation with the same backend."""
    from leaderboard.evaluators.pyramid.scoring import evaluate_dataset
    from leaderboard.tracks.pyramid_gold import dataset_of
    from leaderboard.tracks.summaries import SummariesEvaluator
    from trainers.models.tiny import build_tiny_classifier, build_tiny_tokenizer

    texts = (tiny_pyramid / "references.txt").read_text().splitlines()
    tokenizer = build_tiny_tokenizer(texts * 3, vocab_size=300)
    build_tiny_classifier(tokenizer, labels=("contradiction", "entailment", "neutral"),
                          save_dir=tmp_path / "nli", seed=1)
    evaluator = SummariesEvaluator.parse(f"pyramid-scus-nli=scus:nli,model={tmp_path / 'nli'}")
    assert evaluator.options == (("model", str(tmp_path / "nli")),)
    track = make_track("summaries", [evaluator])
    gold = track.load_gold([str(tiny_pyramid)])
    payload = gold["tinyset"]["tinyset"]
    lines = [{"dataset": "tinyset", "id": i, "summary": s}
             for i, s in zip(payload["ids"], payload["summaries"]["beta"])]
    checked = track.check([("f", n, r) for n, r in enumerate(lines, 1)],
                          track.manifest(gold, "tinyset"))
    result = track.score(checked, gold, "tinyset")["tinyset"].result
    expected = evaluate_dataset(dataset_of(payload), "scus", "nli", systems=["beta"],
                                model=str(tmp_path / "nli"))["beta"]
    assert result["pyramid-scus-nli"] == pytest.approx(
        sum(expected.per_example) / len(expected.per_example), abs=1e-9)
    assert result["headline_evaluator"] == "pyramid-scus-nli"


def test_lenient_lengths_score_as_the_official_evaluation(data_dir, usb_fixture_dir, tmp_path):
    """With strict_lengths off, a list of another length is accepted and scored exactly as
    `sumbench score` scores it (truncated or zero-padded, counted as a length mismatch)."""
    track = make_track("usb", strict_lengths=False)
    gold = track.load_gold(str(data_dir))
    ext = usb_fixture_dir / "predictions" / "extractive_summarization.jsonl"
    records = [json.loads(line) for line in ext.read_text().splitlines()]
    records[1]["prediction"] = records[1]["prediction"][:-3]
    path = tmp_path / "ext.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    with pytest.raises(SubmissionErrors, match="requires exact lengths"):
        _check(make_track("usb"), gold, [Upload("ext.jsonl", path.read_bytes())])
    checked = _check(track, gold, [Upload("ext.jsonl", path.read_bytes())]).checked
    result = track.score(checked, gold, "all")["extractive_summarization"].result
    expected = score_files([path])["extractive_summarization"]
    assert result == expected and result["length_mismatches"] == 1
