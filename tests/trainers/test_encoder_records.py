"""Encoder probabilities into official prediction records (trainers.encoders.records), scored
by the official scorer (`sumbench score`'s tasks.scoring.score_records) from oracle
probabilities built from the gold labels (docs/usb-baselines.md §3, §6)."""
from __future__ import annotations

import random

import pytest

from tasks.scoring import score_records
from tasks.usb.unsupported import UnsupportedSpanPrediction
from tests.trainers.test_encoder_inputs import HAND_RECORD, fixture_records
from trainers.encoders.inputs import evext_inputs, ext_inputs, fac_inputs, unsup_inputs
from trainers.encoders.records import (
    bracketed_summary,
    evext_records,
    ext_records,
    fac_records,
    positive_words,
    span_prediction,
    unsup_records,
    word_runs,
)

FAC, EVEXT, EXT, UNSUP = ("factuality_classification", "evidence_extraction",
                          "extractive_summarization", "unsupported_span_prediction")


def scores(task: str, records: list[dict]) -> dict:
    return score_records({task: records})[task]


def oracle(labels) -> list[float]:
    """Probability 1.0 for a positive label, 0.0 otherwise (masked labels included)."""
    return [1.0 if label == 1 else 0.0 for label in labels]


# ---- FAC ----------------------------------------------------------------------------------
def test_fac_record_holds_the_probability_of_supported(data_dir):
    record = fixture_records(data_dir, FAC)[0]
    (built,) = fac_records([record], [0.25])
    assert built == {**record, "task": FAC, "prediction": [0.75]}
    assert list(built)[-2:] == ["task", "prediction"]


def test_fac_oracle_scores_auc_one_and_the_flipped_record_zero(data_dir, roberta_tokenizer):
    records = fixture_records(data_dir, FAC)
    unsupported = oracle(item.label for item in fac_inputs(records, roberta_tokenizer))
    assert scores(FAC, fac_records(records, unsupported))["auc"] == 1.0
    flipped = [1.0 - p for p in unsupported]
    assert scores(FAC, fac_records(records, flipped))["auc"] == 0.0


# ---- EVEXT --------------------------------------------------------------------------------
def test_evext_oracle_records_score_f1_and_auc_one(data_dir, roberta_tokenizer):
    records = fixture_records(data_dir, EVEXT)
    pairs = evext_inputs(records, roberta_tokenizer)
    built = evext_records(records, pairs, oracle(pair.label for pair in pairs))
    assert len(built) == sum(len(r["summary_lines"]) for r in records) == 37
    assert [b["labels"] for b in built] == [lines for r in records
                                            for lines in r["evidence_labels"]]
    first = built[0]
    assert (first["task"], first["id"], first["summ_idx"]) == (EVEXT, records[0]["id"], 0)
    assert first["prediction"] == [float(j in first["labels"])
                                   for j in range(len(records[0]["input_lines"]))]
    result = scores(EVEXT, built)
    assert (result["f1"], result["auc"], result["length_mismatches"]) == (1.0, 1.0, 0)


def test_evext_regroups_pairs_in_any_order(data_dir, roberta_tokenizer):
    records = fixture_records(data_dir, EVEXT)[:2]
    pairs = evext_inputs(records, roberta_tokenizer)
    probabilities = [round(0.001 * position, 3) for position in range(len(pairs))]
    in_order = evext_records(records, pairs, probabilities)
    shuffled = list(zip(pairs, probabilities))
    random.Random(0).shuffle(shuffled)
    assert evext_records(records, *map(list, zip(*shuffled))) == in_order
    n_lines = len(records[0]["input_lines"])
    assert in_order[1]["prediction"] == probabilities[n_lines:2 * n_lines]


def test_evext_needs_every_pair(data_dir, roberta_tokenizer):
    records = fixture_records(data_dir, EVEXT)[:1]
    pairs = evext_inputs(records, roberta_tokenizer)
    with pytest.raises(ValueError, match="no probability for summary line 0, input line 0"):
        evext_records(records, pairs[1:], [0.0] * (len(pairs) - 1))


# ---- EXT ----------------------------------------------------------------------------------
def test_ext_oracle_records_score_auc_one(data_dir, roberta_tokenizer):
    records = fixture_records(data_dir, EXT)
    articles = ext_inputs(records, roberta_tokenizer)
    built = ext_records(records, [oracle(article.labels) for article in articles])
    assert [b["prediction"] for b in built] == [oracle(r["labels"]) for r in records]
    result = scores(EXT, built)
    assert (result["auc"], result["f1"], result["length_mismatches"]) == (1.0, 1.0, 0)


def test_ext_records_of_kept_sentences_are_padded_by_the_scorer(data_dir, roberta_tokenizer):
    records = fixture_records(data_dir, EXT)
    articles = ext_inputs(records, roberta_tokenizer, max_sentences=5)
    built = ext_records(records, [oracle(article.labels) for article in articles])
    assert all(len(b["prediction"]) == 5 for b in built)
    assert scores(EXT, built)["length_mismatches"] == len(records)


@pytest.mark.parametrize("window", [5, 7, 128])
def test_ext_windows_keep_every_line_and_stitch_back_in_order(data_dir, roberta_tokenizer,
                                                              window):
    records = fixture_records(data_dir, EXT)
    records.append(dict(records[0], id="empty", input_lines=[], labels=[]))
    whole = ext_inputs(records, roberta_tokenizer, max_sentences=1000)
    windows = ext_inputs(records, roberta_tokenizer, max_sentences=window,
                         long_articles="windows")
    for index, record in enumerate(records):
        own = [article for article in windows if article.record_index == index]
        n_lines = len(record["input_lines"])
        assert [len(article.labels) for article in own] == \
            [min(window, n_lines - start) for start in range(0, n_lines, window)] or \
            (n_lines == 0 and [len(article.labels) for article in own] == [0])
        assert [ids for article in own for ids in article.sentence_ids] == \
            whole[index].sentence_ids and all(article.dropped == 0 for article in own)
    built = ext_records(records, [oracle(article.labels) for article in windows], windows)
    assert [b["prediction"] for b in built] == [oracle(r["labels"]) for r in records]
    result = scores(EXT, built)
    assert (result["auc"], result["length_mismatches"]) == (1.0, 0)
    with pytest.raises(ValueError, match="probabilities for"):
        ext_records(records, [oracle(article.labels) for article in windows[1:]], windows)


# ---- UNSUP --------------------------------------------------------------------------------
def test_word_runs_and_brackets():
    assert word_runs([False, True, True, False, True]) == [(1, 2), (4, 4)]
    assert word_runs([]) == []
    summary = HAND_RECORD["summary"]  # words: Alden was renamed in Quebec .
    assert bracketed_summary(summary, [(3, 4)]) == "Alden was renamed []in Quebec[/]."
    assert bracketed_summary(summary, [(0, 0), (5, 5)]) == "[]Alden[/] was renamed in Quebec[].[/]"
    assert bracketed_summary(summary, []) == summary


def test_a_word_follows_its_first_token_above_one_half():
    # words 0 and 2 have tokens; word 1 starts inside the last token of word 0 (position 2)
    words, probabilities = [None, 0, 0, 2, None], [0.0, 0.9, 0.1, 0.5, 0.0]
    assert positive_words(words, probabilities, 3) == [True, False, False]
    assert positive_words(words, [0.0, 0.2, 0.7, 0.51, 0.0], 3) == [False, True, True]
    with pytest.raises(ValueError, match="4 probabilities for 5 tokens"):
        positive_words(words, probabilities[:4], 3)


def test_unsup_prediction_from_token_probabilities(roberta_tokenizer):
    (item,) = unsup_inputs([HAND_RECORD], roberta_tokenizer)
    predicted = span_prediction(HAND_RECORD["summary"], item, oracle(item.labels))
    assert predicted == "Alden was renamed []in Quebec[/]."
    assert span_prediction(HAND_RECORD["summary"], item, [0.5] * len(item.labels)) == \
        HAND_RECORD["summary"]


def test_unsup_round_trip_on_every_fixture_record(data_dir, roberta_tokenizer):
    records = fixture_records(data_dir, UNSUP)
    items = unsup_inputs(records, roberta_tokenizer)
    built = unsup_records(records, items, [oracle(item.labels) for item in items])
    assert len(built) == 27
    assert all(UnsupportedSpanPrediction().reproduces_gold(record) for record in built)
    result = scores(UNSUP, built)
    assert (result["precision"], result["recall"], result["f1"]) == (1.0, 1.0, 1.0)
    unmarked = [b["prediction"] == r["summary"] for b, r in zip(built, records)]
    assert unmarked == ["[]" not in r["annotated_summary"] for r in records]


def test_a_prediction_without_an_opening_mark_scores_as_no_spans(data_dir, roberta_tokenizer):
    records = fixture_records(data_dir, UNSUP)
    items = unsup_inputs(records, roberta_tokenizer)
    built = unsup_records(records, items, [[0.0] * len(item.labels) for item in items])
    assert [b["prediction"] for b in built] == [r["summary"] for r in records]
    assert (scores(UNSUP, built)["recall"], scores(UNSUP, built)["f1"]) == (0.0, 0.0)
    closed_only = [dict(b, prediction=b["summary"] + "[/]") for b in built]
    assert scores(UNSUP, closed_only)["recall"] == 0.0
