"""Heuristic EVEXT / FAC / FIX training data: corruptions, evidence, record shapes equal to
the official derivation's, agreement with the human evidence, model-backed variants with tiny
local models, and `sumbench data heuristic` errors."""
from __future__ import annotations

import json
import random

import pytest

from benchmark.cli import main
from tasks import get_task
from tasks.plumbing.errors import SumbenchError
from tasks.plumbing.io import read_jsonl
from tasks.usb.corruptions import (
    corrupt,
    date_swap,
    entity_swap,
    names,
    negation,
    number_swap,
    pronoun_swap,
)
from tasks.usb.heuristic import (
    HeuristicSpec,
    build_heuristic_datasets,
    evidence_agreement,
    rouge_l_evidence,
)

CONTEXT = "Port Alden opened in Tucson in 1921. Ohio Power sold 12 ships to Lisbon in 1985."


def test_each_corruption_changes_one_span():
    rng = random.Random(0)
    assert names("In 1990, Port Alden moved to Tucson.") == ["Port Alden", "Tucson"]
    swapped = entity_swap("In 1990, Port Alden moved to Tucson.", CONTEXT, rng)
    assert swapped.kind == "entity" and swapped.old in ("Port Alden", "Tucson")
    assert swapped.new in names(CONTEXT) and swapped.new not in ("Port Alden", "Tucson")
    assert number_swap("It sold 7 ships.", CONTEXT, rng).text == "It sold 12 ships."
    shifted = number_swap("It sold 7 ships.", "no numbers here", random.Random(1))
    assert shifted.old == "7" and shifted.new != "7"
    assert date_swap("It opened in 1921.", CONTEXT, rng).text == "It opened in 1985."
    assert pronoun_swap("She sold his ship.", "", rng).text == "He sold his ship."
    assert negation("The bridge was closed.", "", rng).text == "The bridge was not closed."
    assert negation("The bridge was not closed.", "", rng).text == "The bridge was closed."
    assert negation("Nothing to negate here.", "", rng) is None


def test_corrupt_is_seeded_and_none_when_nothing_applies():
    sentence = "In 1990, Port Alden was moved to Tucson by its owners."
    first = corrupt(sentence, CONTEXT, random.Random(7))
    assert first == corrupt(sentence, CONTEXT, random.Random(7)) and first.text != sentence
    assert corrupt("a plain lower case sentence", "", random.Random(0)) is None


def test_rouge_l_evidence_picks_the_best_line_and_skips_headers():
    source = [{"txt": "Port Alden", "is_header": True}, {"txt": "It rained.", "is_header": False},
              {"txt": "Port Alden moved to Tucson in 1990.", "is_header": False}]
    assert rouge_l_evidence(["Port Alden moved to Tucson."], source) == [[2]]


def test_agreement_by_hand():
    pairs = [((1, 2), (2,)), ((3,), (3, 4))]
    assert evidence_agreement(pairs) == {"sentences": 2, "precision": 2 / 3, "recall": 2 / 3,
                                         "f1": pytest.approx(2 / 3)}


@pytest.fixture(scope="module")
def heuristic_data(usb_fixture_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("heuristic") / "data"
    report = build_heuristic_datasets(usb_fixture_dir / "raw", out, HeuristicSpec(seed=3))
    return out, report


def test_records_have_the_official_shapes_and_load(heuristic_data, data_dir):
    out, report = heuristic_data
    for task in ("evidence_extraction", "factuality_classification", "fixing_factuality"):
        ours = read_jsonl(out / "all" / task / "train.jsonl")
        human = read_jsonl(data_dir / "all" / task / "train.jsonl")
        assert ours and [list(r) for r in ours[:1]] == [list(r) for r in human[:1]]
        assert len(get_task(task).load("train", "all", str(out))) == len(ours)
    fac = read_jsonl(out / "all" / "factuality_classification" / "train.jsonl")
    fix = read_jsonl(out / "all" / "fixing_factuality" / "train.jsonl")
    notes = read_jsonl(out / "all" / "fixing_factuality" / "train.corruptions.jsonl")
    assert [r["label"] for r in fac[:4]] == [0, 1, 0, 1] and len(fac) == 2 * len(fix)
    assert fac[1]["summary_sent"] == fix[0]["initial_summary"]
    assert fac[0]["summary_sent"] == fix[0]["fixed_summary"]
    assert [(n["id"], n["summ_idx"]) for n in notes] == [(r["id"], r["summ_idx"]) for r in fix]
    assert not (out / "all" / "abstractive_summarization").exists()
    assert report["records"]["all"]["fixing_factuality"] == {"train": len(fix),
                                                            "validation": 13}
    info = json.loads((out / "build_info.json").read_text())
    assert info["provenance"]["seeds"] == {"seed": 3}


def test_agreement_with_the_human_evidence_of_the_fixture(heuristic_data):
    _, report = heuristic_data
    agreement = report["evidence_agreement_with_human"]
    assert agreement["sentences"] == 24
    assert agreement["precision"] == pytest.approx(6 / 35)
    assert agreement["recall"] == pytest.approx(18 / 43)
    assert "unknown" in report["corruption_agreement_with_human"]
    # every sentence of the fixture has a name, a year or an auxiliary to corrupt
    assert report["corruption_types"] == {"date": 12, "entity": 5, "negation": 7}


@pytest.mark.slow
def test_model_backed_evidence_and_infill_with_tiny_models(usb_fixture_dir, tmp_path, capsys):
    from trainers.models.tiny import build_tiny_classifier, build_tiny_t5, build_tiny_tokenizer

    texts = [line["txt"] for path in (usb_fixture_dir / "raw" / "annotations").rglob("*.json")
             for line in json.loads(path.read_text())["annotations"]["source"]]
    tokenizer = build_tiny_tokenizer(texts + ["<extra_id_0> <extra_id_1>"], vocab_size=300)
    build_tiny_classifier(tokenizer, labels=("not aligned", "aligned"),
                          save_dir=tmp_path / "pal", seed=0)
    build_tiny_t5(tokenizer, save_dir=tmp_path / "t5", seed=0)
    code = main(["data", "heuristic", "--raw", str(usb_fixture_dir / "raw"), "--out",
                 str(tmp_path / "model-made"), "--evidence", "superpal", "--superpal-model",
                 str(tmp_path / "pal"), "--corruption", "infill", "--infill-model",
                 str(tmp_path / "t5"), "--splits", "train"])
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    assert set(report["corruption_types"]) <= {"infill"}
    evext = read_jsonl(tmp_path / "model-made" / "all" / "evidence_extraction" / "train.jsonl")
    assert all(lines for record in evext for lines in record["evidence_labels"])


@pytest.mark.parametrize("args, message", [
    (["--evidence", "superpal"], "needs --superpal-model"),
    (["--corruption", "infill"], "needs --infill-model"),
    (["--splits", "train,dev"], "--splits takes"),
    (["--tasks", "ABS"], "heuristic labels exist for"),
])
def test_cli_errors(usb_fixture_dir, tmp_path, capsys, args, message):
    code = main(["data", "heuristic", "--raw", str(usb_fixture_dir / "raw"), "--out",
                 str(tmp_path / "x"), *args])
    assert code == 2 and message in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


def test_a_foreign_output_folder_is_not_replaced(usb_fixture_dir, tmp_path):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    with pytest.raises(SumbenchError, match="refusing to replace it"):
        build_heuristic_datasets(usb_fixture_dir / "raw", tmp_path / "mine", HeuristicSpec())
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep me"
