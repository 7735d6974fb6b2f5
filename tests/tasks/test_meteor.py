"""METEOR (tasks.metrics.meteor): the evaluator `meteor` gives NLTK's own `meteor_score`
(nltk 3.10.4) of `nltk.word_tokenize`d texts, best over the references, on 600 seeded random
cases with a WordNet stub (stems, synonyms, case, several references, empty texts) and with
other α/β/γ; by-hand values; NLTK's doctest value 0.6944 with Debian's WordNet 3.0 (which
`.ci/run` installs and requires through SUMBENCH_REQUIRE_WORDNET; elsewhere those tests skip
saying why); WordNet look-up and its one-line errors; bad input; `sumbench meta-eval
--metric meteor` end to end."""
from __future__ import annotations

import gzip
import json
import random
import re
from pathlib import Path

import pytest
from nltk.translate.meteor_score import meteor_score

from tasks.metrics.evaluators import Evaluator, configured, load_evaluators, score_summaries
from tasks.metrics.meteor import MeteorEvaluator, meteor, tokens
from tasks.metrics.wordnet import (
    DEBIAN_FOLDER,
    ENV_VARIABLE,
    LEXNAMES,
    find_wordnet,
    lexnames_text,
    load_wordnet,
    missing_files,
)
from tasks.plumbing.errors import SumbenchError, UnknownNameError

#: synonyms the stub WordNet knows (each word's synsets hold the others' lemma names). NLTK
#: looks synonyms up on the Porter stems of the words the first two stages left, so "feline"
#: (stem "felin") and "house" ("hous") find none: the random cases hold both kinds
SYNONYMS = [("cat", "puss", "feline", "true_cat"), ("dog", "hound"), ("big", "great", "large"),
            ("house", "home"), ("quick", "fast", "rapid", "speedy")]
WORDS = ["the", "a", "of", "Cat", "cat", "cats", "puss", "feline", "dog", "Dogs", "hound",
         "hounds", "big", "great", "large", "house", "houses", "home", "quick", "fast", "rapid",
         "quickly", "run", "runs", "running", "ran", "speedy", ",", "."]


class StubLemma:
    def __init__(self, name: str):
        self._name = name

    def name(self) -> str:
        return self._name


class StubSynset:
    def __init__(self, names):
        self._lemmas = [StubLemma(name) for name in names]

    def lemmas(self):
        return self._lemmas


class StubWordNet:
    """NLTK's WordNet interface as METEOR uses it: synsets(word) -> .lemmas() -> .name()."""

    def synsets(self, word: str):
        return [StubSynset(group) for group in SYNONYMS if word in group]


class NoWordNet:
    def synsets(self, word: str):
        return []


def random_tokens(rng: random.Random, longest: int) -> list[str]:
    return [rng.choice(WORDS) for _ in range(rng.randint(0, longest))]


def random_cases(seed: int, count: int):
    """(summary tokens, [reference tokens...]) pairs; about one text in 13 is empty."""
    rng = random.Random(seed)
    return [(random_tokens(rng, 12), [random_tokens(rng, 12) for _ in range(rng.randint(1, 3))])
            for _ in range(count)]


@pytest.fixture(scope="module")
def stub_meteor():
    return MeteorEvaluator(wordnet_reader=StubWordNet())


def test_600_random_cases_equal_nltk_s_own_meteor_score(stub_meteor):
    cases = random_cases(seed=66, count=600)
    assert sum(not summary for summary, _ in cases) > 20  # empty summaries are in
    assert sum(len(refs) > 1 for _, refs in cases) > 300  # several references too
    summaries = [" ".join(summary) for summary, _ in cases]
    references = [[" ".join(ref) for ref in refs] for _, refs in cases]
    assert [tokens(text) for text in summaries] == [summary for summary, _ in cases]
    ours = score_summaries(stub_meteor, summaries, references, None, "meteor")
    official = [meteor_score(refs, summary, wordnet=StubWordNet()) for summary, refs in cases]
    assert ours == official
    assert len({round(value, 6) for value in ours}) > 200 and max(ours) > 0.6
    no_synonyms = [meteor_score(refs, summary, wordnet=NoWordNet()) for summary, refs in cases]
    assert sum(a != b for a, b in zip(ours, no_synonyms)) > 50  # the stub's synonyms count


@pytest.mark.parametrize("parameters", [
    {"alpha": "0.5"}, {"beta": "1"}, {"gamma": "0"}, {"alpha": "0.8", "beta": "2", "gamma": "1"},
])
def test_other_parameters_reach_nltk(stub_meteor, parameters):
    evaluator = stub_meteor.with_options(parameters)
    cases = random_cases(seed=7, count=60)
    ours = evaluator.score([" ".join(s) for s, _ in cases],
                           [[" ".join(r) for r in refs] for _, refs in cases], None)
    as_numbers = {name: float(value) for name, value in parameters.items()}
    assert ours == [meteor_score(refs, s, wordnet=StubWordNet(), **as_numbers)
                    for s, refs in cases]
    assert ours != stub_meteor.score([" ".join(s) for s, _ in cases],
                                     [[" ".join(r) for r in refs] for _, refs in cases], None)
    assert {k: evaluator.settings[k] for k in parameters} == as_numbers


@pytest.mark.parametrize("summary, references, expected", [
    # 3 matches in 1 chunk: P = R = 1, penalty 0.5 * (1/3)^3
    ("the cat sat", ["the cat sat"], 1 - 0.5 / 27),
    # "The"/"the" (lower-cased), "puss"/"cat" (stub synonym): 3 matches, 1 chunk
    ("The puss sat", ["the cat sat"], 1 - 0.5 / 27),
    ("puss sat", ["cat sat"], 1 - 0.5 / 8),
    # synonyms of the stems: "feline" -> "felin" has none, so "sat" alone matches
    ("feline sat", ["cat sat"], (1 - 0.5) * 0.5),
    # stems: runs/running -> run; 2 matches in 2 chunks of hyp 2, ref 3
    ("runs dogs", ["dog x running"], (1 - 0.5 * 1.0) * (1 * (2 / 3)) / (0.9 * 1 + 0.1 * (2 / 3))),
    # true_cat is a lemma with "_": NLTK skips it, so no synonym match
    ("true_cat", ["feline"], 0.0),
    # the best reference counts
    ("the cat sat", ["no match here", "the cat sat"], 1 - 0.5 / 27),
    ("", ["the cat"], 0.0), ("the cat", [""], 0.0), ("", [""], 0.0),
])
def test_values_by_hand(stub_meteor, summary, references, expected):
    assert stub_meteor.score([summary], [references], None) == [pytest.approx(expected, abs=1e-12)]


def test_tokens_are_nltk_word_tokenize_with_the_shipped_punkt():
    assert tokens("Don't stop. The U.S. team won!") == [
        "Do", "n't", "stop", ".", "The", "U.S.", "team", "won", "!"]
    assert meteor(["The", "CAT"], [["the", "cat"]], StubWordNet()) == pytest.approx(1 - 0.5 / 8)


# ---- real WordNet 3.0 (the `wordnet_folder` fixture: tests/conftest.py) ----------------------


GUIDE = ("It is a guide to action which ensures that the military always obeys the commands "
         "of the party")
GUIDE_REFERENCES = [
    "It is a guide to action that ensures that the military will forever heed Party commands",
    "It is the guiding principle which guarantees the military forces always being under the "
    "command of the Party",
    "It is the practical guide for the army always to heed the directions of the party"]


def test_nltk_s_doctest_value_with_wordnet_3_0(wordnet_folder):
    evaluator = configured("meteor", {"wordnet": str(wordnet_folder)})
    assert evaluator.problem() is None
    values = evaluator.score([GUIDE, "non matching hypothesis"],
                             [GUIDE_REFERENCES, ["this is a cat"]], None)
    assert round(values[0], 4) == 0.6944 and values[1] == 0.0
    reader = load_wordnet(wordnet_folder)
    assert reader.get_version() == "3.0"
    assert [s.name() for s in reader.synsets("dog")[:2]] == ["dog.n.01", "frump.n.01"]
    assert reader.synsets("dog")[0].lexname() == "noun.animal"
    settings = evaluator.settings
    assert settings["wordnet_version"] == "3.0" and settings["wordnet"] == str(wordnet_folder)
    assert (settings["alpha"], settings["beta"], settings["gamma"]) == (0.9, 3.0, 0.5)
    assert settings["nltk"] == "3.10.4" and "word_tokenize" in settings["tokenizer"]


def test_real_synonyms_match_where_the_stub_has_none(wordnet_folder):
    real = configured("meteor", {"wordnet": str(wordnet_folder)})
    stub = MeteorEvaluator(wordnet_reader=StubWordNet())
    texts = (["the auto stopped"], [["the car stopped"]], None)
    assert real.score(*texts)[0] == pytest.approx(1 - 0.5 / 27)  # car.n.01 holds auto
    assert stub.score(*texts)[0] == pytest.approx(0.5 * (2 / 3))  # 2 matches in 2 chunks
    # NLTK looks synonyms up on Porter stems: "automobile" -> "automobil" has none
    assert real.score(["the automobile stopped"], [["the car stopped"]], None)[0] == \
        pytest.approx(0.5 * (2 / 3))


def test_lexnames_are_those_of_wordnet_s_manual_page():
    page = Path("/usr/share/man/man5/lexnames.5WN.gz")
    if not page.is_file():
        pytest.skip(f"{page} (Debian wordnet-base's manual page) is absent")
    rows = re.findall(r"^(\d\d)\t(\S+)", gzip.open(page, "rt").read(), re.MULTILINE)
    assert [name for _, name in rows] == list(LEXNAMES)
    assert [int(number) for number, _ in rows] == list(range(45))
    assert lexnames_text().splitlines()[3] == "03\tnoun.Tops\t1"


# ---- finding WordNet, and its errors ------------------------------------------------------------
def test_a_missing_wordnet_is_a_one_line_problem(tmp_path, monkeypatch):
    (tmp_path / "index.noun").write_text("")
    evaluator = configured("meteor", {"wordnet": str(tmp_path)})
    problem = evaluator.problem()
    assert problem.startswith(f"evaluator 'meteor': no WordNet database at {tmp_path}")
    assert "apt-get install wordnet-base" in problem and "\n" not in problem
    assert "index.adj" in problem and "index.noun" not in problem.split("missing")[1]
    with pytest.raises(SumbenchError, match="no WordNet database"):
        score_summaries(evaluator, ["a"], [["a"]], None)
    monkeypatch.setenv(ENV_VARIABLE, str(tmp_path / "nowhere"))
    assert f"${ENV_VARIABLE}" in configured("meteor").problem()
    assert evaluator.settings["wordnet"] is None


def test_the_environment_variable_and_the_option_find_wordnet(wordnet_folder, monkeypatch):
    monkeypatch.setenv(ENV_VARIABLE, str(wordnet_folder))
    assert find_wordnet() == wordnet_folder
    assert find_wordnet(str(wordnet_folder)) == wordnet_folder
    assert missing_files(wordnet_folder) == []
    if wordnet_folder == DEBIAN_FOLDER:
        assert not (DEBIAN_FOLDER / "lexnames").exists()  # the reader supplies it


# ---- the registry, options and bad input --------------------------------------------------------
def test_registered_as_an_evaluator():
    evaluator = load_evaluators().get("meteor")
    assert isinstance(evaluator, Evaluator) and evaluator.name == "meteor"
    assert not evaluator.reads_sources and evaluator.reads_references
    assert evaluator.option_names == ("wordnet", "alpha", "beta", "gamma")
    assert evaluator.cost() is None or "seconds" in evaluator.cost()


@pytest.mark.parametrize("options, error, message", [
    ({"alpha": "high"}, SumbenchError, "meteor option alpha='high': expected a number"),
    ({"gamma": "-1"}, SumbenchError, "meteor option gamma='-1': expected a finite number >= 0"),
    ({"beta": "nan"}, SumbenchError, "meteor option beta='nan'"),
    ({"wordnt": "/x"}, UnknownNameError, "wordnet"),
])
def test_bad_options(options, error, message):
    with pytest.raises(error, match=re.escape(message)):
        configured("meteor", options)


@pytest.mark.parametrize("summaries, references, message", [
    (["a", "b"], [["a"]], "1 references for 2 summaries"),
    (["a"], [["a"], ["b"]], "2 references for 1 summaries"),
    (["a", "b"], [["a"], []], "summary 2 has no reference"),
])
def test_bad_reference_lists(stub_meteor, summaries, references, message):
    with pytest.raises(SumbenchError, match=message):
        score_summaries(stub_meteor, summaries, references, None, "meteor")
    with pytest.raises(SumbenchError, match="evaluator 'meteor'"):
        stub_meteor.score(summaries, references, None)


# ---- meta-eval end to end -----------------------------------------------------------------------
def test_meta_eval_with_meteor(wordnet_folder, tmp_path, capsys):
    from helpers import sumbench
    from lb_helpers import write_pyramid_folder

    root = write_pyramid_folder(tmp_path / "tiny", n_examples=4)
    out = tmp_path / "meta.json"
    code, printed, err = sumbench(capsys, "meta-eval", "--pyramid", root, "--metric", "meteor",
                                  "--metric-option", f"wordnet={wordnet_folder}", "--out", out)
    assert code == 0, err
    assert json.loads(printed)["all"]["system"]["kendall"] == pytest.approx(1.0)
    written = json.loads(out.read_text())
    assert written["config"]["metric_settings"]["wordnet_version"] == "3.0"
    references = (root / "references.txt").read_text().splitlines()
    summaries = (root / "summaries" / "beta.summary").read_text().splitlines()
    expected = configured("meteor", {"wordnet": str(wordnet_folder)}).score(
        summaries, [[text] for text in references], None)
    assert written["system_means"]["metric"]["beta"] == pytest.approx(sum(expected) / 4)
    failed = tmp_path / "failed.json"
    code, _, err = sumbench(capsys, "meta-eval", "--pyramid", root, "--metric", "meteor",
                            "--metric-option", f"wordnet={tmp_path}", "--out", failed)
    assert code != 0 and "no WordNet database" in err and len(err.strip().splitlines()) == 1
    assert not failed.exists()
