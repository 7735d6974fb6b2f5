"""chrF (tasks.metrics.chrf): the evaluator `chrf` gives sacrebleu 2.6.0's own
`CHRF().sentence_score` on 300 seeded random cases (1-3 references, empty summaries and
references, case, spaces, non-ASCII) and with other options (chrF++, lowercase, whitespace,
ε smoothing); values by hand; `chrf_corpus` is sacrebleu's `corpus_score` (also with a varying
number of references) and differs from the mean of segment scores; bad input; `sumbench
meta-eval --metric chrf` end to end."""
from __future__ import annotations

import json
import random
import re

import pytest
from sacrebleu.metrics import CHRF

from tasks.metrics.chrf import DEFAULTS, ChrfEvaluator, chrf_corpus, chrf_segments
from tasks.metrics.evaluators import Evaluator, configured, load_evaluators, score_summaries
from tasks.plumbing.errors import SumbenchError, UnknownNameError

ALPHABET = "aabbcdeeéfgh  ,.AB"
WORDS = ["the", "cat", "Cat", "sat", "on", "mat", "mats", "dog", "über", "a", "x", "the."]


def random_text(rng: random.Random) -> str:
    if rng.random() < 0.5:
        return "".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 25)))
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 8)))


def random_cases(seed: int, count: int):
    """(summary, references); in about one case in 10 a reference is the summary itself."""
    rng = random.Random(seed)
    cases = []
    for _ in range(count):
        summary = random_text(rng)
        references = [random_text(rng) for _ in range(rng.randint(1, 3))]
        if rng.random() < 0.1:
            references[rng.randrange(len(references))] = summary
        cases.append((summary, references))
    return cases


def test_300_random_cases_equal_sacrebleu_s_sentence_score():
    cases = random_cases(seed=66, count=300)
    assert sum(not summary.strip() for summary, _ in cases) > 10
    assert sum(any(not ref.strip() for ref in refs) for _, refs in cases) > 10
    assert sum(len(refs) > 1 for _, refs in cases) > 150
    summaries, references = [s for s, _ in cases], [refs for _, refs in cases]
    ours = score_summaries(configured("chrf"), summaries, references, None, "chrf")
    official = [CHRF().sentence_score(summary, refs).score for summary, refs in cases]
    assert ours == official
    assert len({round(value, 6) for value in ours}) > 150 and 0.0 in ours and 100.0 in ours


@pytest.mark.parametrize("options", [
    {"word_order": "2"}, {"lowercase": "true"}, {"whitespace": "true"},
    {"eps_smoothing": "true"}, {"char_order": "4", "beta": "1"}, {"beta": "0.5"},
])
def test_options_are_sacrebleu_s(options):
    evaluator = configured("chrf", options)
    cases = random_cases(seed=5, count=80)
    parsed = {name: evaluator.settings[name] for name in options}
    ours = evaluator.score([s for s, _ in cases], [refs for _, refs in cases], None)
    assert ours == [CHRF(**parsed).sentence_score(s, refs).score for s, refs in cases]
    assert ours != configured("chrf").score([s for s, _ in cases],
                                            [refs for _, refs in cases], None)


@pytest.mark.parametrize("summary, references, expected", [
    # orders 1-2 only (3-6: no hypothesis n-grams): P = 1, R = (2/3 + 1/2) / 2 = 7/12,
    # F = 5 P R / (4 P + R) = 35/55
    ("ab", ["abd"], 100 * 35 / 55),
    ("ab", ["x", "abd"], 100 * 35 / 55),  # the best reference's statistics
    ("a b", ["ab"], 100.0),  # whitespace removed: "ab" against "ab"
    ("abc", ["abc", ""], 100.0),
    ("", ["abc"], 0.0), ("abc", [""], 0.0), ("", [""], 0.0),
])
def test_values_by_hand(summary, references, expected):
    assert chrf_segments([summary], [references]) == [pytest.approx(expected, abs=1e-9)]


def test_the_corpus_statistic_is_sacrebleu_s_corpus_score():
    cases = random_cases(seed=11, count=40)
    summaries = [s for s, _ in cases]
    uniform = [refs[:1] + ["a cat"] for _, refs in cases]  # two references each
    streams = [[refs[0] for refs in uniform], [refs[1] for refs in uniform]]
    assert chrf_corpus(summaries, uniform) == CHRF().corpus_score(summaries, streams).score
    varying = [refs for _, refs in cases]  # 1-3 references: the streams are padded with None
    padded = [[refs[i] if i < len(refs) else None for refs in varying] for i in range(3)]
    assert chrf_corpus(summaries, varying) == CHRF().corpus_score(summaries, padded).score
    segments = chrf_segments(summaries, varying)
    assert chrf_corpus(summaries, varying) != pytest.approx(sum(segments) / len(segments))
    assert chrf_corpus(["ab"], [["abd"]]) == pytest.approx(100 * 35 / 55)
    assert chrf_corpus(summaries, varying, {"word_order": 2}) == CHRF(word_order=2).corpus_score(
        summaries, padded).score


def test_registered_with_settings():
    evaluator = load_evaluators().get("chrf")
    assert isinstance(evaluator, Evaluator) and evaluator.name == "chrf"
    assert not evaluator.reads_sources and evaluator.problem() is None
    settings = evaluator.settings
    assert settings["sacrebleu"] == "2.6.0"
    assert {name: settings[name] for name in DEFAULTS} == {
        "char_order": 6, "word_order": 0, "beta": 2, "lowercase": False, "whitespace": False,
        "eps_smoothing": False}
    assert ChrfEvaluator().with_options({"word_order": 2}).settings["word_order"] == 2
    evaluator.score(["a"], [["a"]], None)
    assert evaluator.cost()["seconds"] >= 0


@pytest.mark.parametrize("options, error, message", [
    ({"beta": "x"}, SumbenchError, "chrf option beta='x': expected a finite number >= 0"),
    ({"char_order": "-1"}, SumbenchError, "chrf option char_order='-1': expected an integer"),
    ({"word_order": "two"}, SumbenchError, "chrf option word_order='two'"),
    ({"lowercase": "yes"}, SumbenchError, "chrf option lowercase='yes': expected true or false"),
    ({"char_order": "0"}, SumbenchError, "char_order and word_order cannot both be 0"),
    ({"order": "6"}, UnknownNameError, "char_order"),
])
def test_bad_options(options, error, message):
    with pytest.raises(error, match=re.escape(message)):
        configured("chrf", options)


@pytest.mark.parametrize("summaries, references, message", [
    (["a", "b"], [["a"]], "1 reference lists for 2 summaries"),
    (["a"], [["a"], ["b"]], "2 reference lists for 1 summaries"),
    (["a", "b"], [["a"], []], "summary 2 has no reference"),
])
def test_bad_reference_lists(summaries, references, message):
    with pytest.raises(SumbenchError, match=f"chrf: {message}"):
        chrf_segments(summaries, references)
    with pytest.raises(SumbenchError, match=f"chrf: {message}"):
        chrf_corpus(summaries, references)
    with pytest.raises(SumbenchError, match="chrf"):
        score_summaries(configured("chrf"), summaries, references, None, "chrf")
    with pytest.raises(SumbenchError, match="at least one summary"):
        chrf_corpus([], [])


def test_a_missing_sacrebleu_is_a_one_line_problem(monkeypatch):
    import tasks.metrics.chrf as chrf

    real = chrf.importlib.util.find_spec
    monkeypatch.setattr(chrf.importlib.util, "find_spec",
                        lambda name: None if name == "sacrebleu" else real(name))
    assert configured("chrf").problem() == chrf.MISSING_SACREBLEU
    with pytest.raises(SumbenchError, match=r"^chrf needs sacrebleu, .*pip install"):
        score_summaries(configured("chrf"), ["a"], [["a"]], None, "chrf")


def test_meta_eval_with_chrf(tmp_path, capsys):
    from helpers import sumbench
    from lb_helpers import write_pyramid_folder

    root = write_pyramid_folder(tmp_path / "tiny", n_examples=4)
    out = tmp_path / "meta.json"
    code, printed, err = sumbench(capsys, "meta-eval", "--pyramid", root, "--metric", "chrf",
                                  "--metric-option", "word_order=2", "--out", out)
    assert code == 0, err
    assert json.loads(printed)["all"]["system"]["kendall"] == pytest.approx(1.0)
    written = json.loads(out.read_text())
    assert written["config"]["metric_settings"]["word_order"] == 2
    references = (root / "references.txt").read_text().splitlines()
    summaries = (root / "summaries" / "gamma.summary").read_text().splitlines()
    expected = [CHRF(word_order=2).sentence_score(s, [r]).score
                for s, r in zip(summaries, references)]
    assert written["system_means"]["metric"]["gamma"] == pytest.approx(sum(expected) / 4)
    failed = tmp_path / "failed.json"
    code, _, err = sumbench(capsys, "meta-eval", "--pyramid", root, "--metric", "chrf",
                            "--metric-option", "beta=high", "--out", failed)
    assert code != 0 and "chrf option beta='high'" in err and len(err.strip().splitlines()) == 1
    assert not failed.exists()
