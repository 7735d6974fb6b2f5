"""Scoring that scales (issue 11 part 2): streaming `score_files` gives the numbers of scoring
everything at once and keeps no records; the fast paths give identical results; heavy
libraries are imported only where used."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tasks.scoring import read_prediction_files, score_files, score_records

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_streaming_scores_equal_scoring_all_records_at_once(usb_fixture_dir, monkeypatch):
    import tasks.scoring as scoring

    paths = sorted((usb_fixture_dir / "predictions").glob("*.jsonl"))
    at_once = score_records(read_prediction_files(paths))
    monkeypatch.setattr(scoring, "CHUNK_RECORDS", 2)  # many chunks per task
    assert score_files(paths) == at_once
    assert score_files(paths, bootstrap=20, seed=3) == score_records(
        read_prediction_files(paths), bootstrap=20, seed=3)


def test_a_duplicate_in_a_later_chunk_names_its_first_place(usb_fixture_dir, tmp_path,
                                                            monkeypatch):
    import tasks.scoring as scoring

    monkeypatch.setattr(scoring, "CHUNK_RECORDS", 2)
    lines = (usb_fixture_dir / "predictions" / "factuality_classification.jsonl").read_text(
        ).splitlines()
    path = tmp_path / "fac.jsonl"
    path.write_text("\n".join([*lines, lines[1]]) + "\n")
    with pytest.raises(scoring.DataError, match=f"{path}:{len(lines) + 1}, field 'id': "
                       rf"duplicate record \(.*\), first seen at {path}:2"):
        score_files([path])


def test_span_fast_paths_give_the_tags_of_the_full_diff():
    from tasks.metrics.spans import bio_tags, marked_regions, span_example, word_spans

    summary = "The mayor opened a bridge in 1990 after a long vote."
    annotated = "The mayor opened a bridge in 1990 []after a long vote[/]."
    for prediction in (summary, annotated, "The mayor []opened[/] a bridge in 1990 after a "
                       "long vote.", "Totally different text."):
        gold, predicted = span_example(prediction, summary, annotated)
        expected_prediction = prediction if "[]" in prediction else summary
        full = [("B-" if not before else "I-") + "UNSUP" if now else "O"
                for before, now in _inside_pairs(summary, expected_prediction, word_spans,
                                                 marked_regions)]
        assert predicted == full and gold == bio_tags(summary, annotated)


def _inside_pairs(summary, tagged, word_spans, marked_regions):
    regions = marked_regions(summary, tagged)  # always the diff, no fast path
    inside = [any(s <= start < e for s, e in regions) for start, _ in word_spans(summary)]
    return list(zip([False] + inside[:-1], inside))


def test_memoised_stemming_gives_rouge_scores_tokens(pyramid_data_dir):
    from rouge_score import tokenizers

    from tasks.metrics.recall import CachingTokenizer

    texts = (pyramid_data_dir / "realsumm" / "references.txt").read_text().splitlines()[:40]
    texts += ["Running runners ran; the 3rd-party's café: naïve UPPER cases!", ""]
    for stem in (True, False):
        ours, theirs = CachingTokenizer(stem), tokenizers.DefaultTokenizer(stem)
        assert [ours.tokenize(t) for t in texts] == [theirs.tokenize(t) for t in texts]


def test_lexical_presence_tokenizes_each_text_once_per_run():
    from leaderboard.evaluators.pyramid.presence import LexicalBackend

    backend = LexicalBackend(0.5)
    pairs = [("Police arrested two men.", unit) for unit in
             ("Police arrested men", "Two men fled", "The police")]
    results = backend.score(pairs)
    assert [r.probability for r in results] == [1.0, 2 / 3, 1.0]  # {two, men, fled}: 2 of 3
    assert len(backend.tokens) == 4  # one summary and three units


@pytest.mark.parametrize("code", [
    "from benchmark.cli import main\ntry:\n    main(['score', '--help'])\nexcept SystemExit:\n"
    "    pass",
    "from tasks.scoring import score_files\nimport sys\n"
    "score_files([sys.argv[1] + '/abstractive_summarization.jsonl', "
    "sys.argv[1] + '/fixing_factuality.jsonl'])",
])
def test_score_help_and_rouge_only_scoring_import_no_heavy_library(code, usb_fixture_dir):
    check = code + "\nimport sys, json\nprint(json.dumps(sorted(m for m in ('torch', 'sklearn', " \
        "'nltk', 'transformers') if m in sys.modules)))"
    done = subprocess.run([sys.executable, "-c", check, str(usb_fixture_dir / "predictions")],
                          cwd=REPO, capture_output=True, text=True, check=True)
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []
