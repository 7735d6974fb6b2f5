"""nQAPyramid penalties: crafted repetitions, hand-computed length penalties, the values
released with QAPyramid, alpha calibration and the `qapyramid normalize` CLI."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

from benchmark.cli import main
from leaderboard.evaluators.qapyramid.penalties import (
    calibrate_alpha,
    length_penalty,
    normalize,
    penalties,
    repeated_word_mask,
    repetition_penalty,
    repetition_ratio,
    sentence_words,
    with_alpha,
)
from tasks.plumbing.errors import SumbenchError

# QAPyramid dataset (shiyue/QAPyramid, cnndm_test,
# example 000571afe702684d90c1d222ce70b1e1375c1016):
# reference, the ten system summaries, and the released QAPyramid, p_l and nQAPyramid (p_r = 1).
REFERENCE = ("Juan Arango escaped punishment from the referee for biting Jesus Zavela . He could "
             "face a retrospective punishment for the incident . Arango had earlier scored a free "
             "kick in his team's 4-3 defeat .")
SUMMARIES = {
    "bart": "Juan Arango bites Jesus Zavela in a moment of madness in Club Tijuana's 4-3 defeat "
            "by Monterrey in the Mexican league. The Venezuelan icon sank his teeth into the "
            "shoulder of the opponent as his temper flared in the defeat. He was not booked by "
            "the referee but could face a heavy retrospective ban. Arango had earlier curled in a "
            "magnificent free kick for his team to bring them level after falling 2-0 down.",
    "pegasus": "Club Tijuana lost 4-3 to Monterrey in the Mexican league. Juan Arango was not "
               "booked but could face a heavy retrospective ban. A Arango free kick had brought "
               "his team level at 2-2.",
    "brio": "Juan Arango bites the shoulder of opponent Jesus Zavela in the Mexican league. The "
            "Club Tijuana star earlier scored a magnificent free kick to bring his team level "
            "against Monterrey\xa0. The Venezuelan icon could face a retrospective ban for the "
            "bite. Arango's side lost the game 4-3 in Mexico.",
    "brio-ext": "He was not booked by the referee but could face a heavy retrospective ban. Juan "
                "Arango (left) bites the shoulder of opponent Jesus Zavela in a moment of "
                "madness. Arango (right) earlier scored a magnificent free kick to bring his Club "
                "Tijuana team level against Monterrey.",
    "matchsum": "Club Tijuana star Juan Arango conjured memories Luis Suarez in his team's 4-3 "
                "defeat by Monterrey in the Mexican league - but it was not through prodigious "
                "scoring. Juan Arango (left) bites the shoulder of opponent Jesus Zavela in a "
                "moment of madness.",
    "mixtral-8x22b-instruct-v0.1": "Juan Arango bit Jesus Zavela in Club Tijuana's 4-3 defeat by "
        "Monterrey in the Mexican league . The Venezuelan was not booked by the referee but "
        "could face a heavy retrospective ban . Arango had earlier scored a magnificent free "
        "kick to bring his team level at 2-2.",
    "llama-3-8b-instruct": " Juan Arango, a star player for Club Tijuana, was involved in a "
        "biting incident during a Mexican league match against Monterrey . Arango, who had "
        "earlier scored a magnificent free kick, sank his teeth into the shoulder of Jesus "
        "Zavela in a moment of anger . The incident could result in a heavy retrospective ban "
        "for Arango, who has played for clubs in Spain and Germany during his 10-year European "
        "stint.",
    "GPT4": "Juan Arango of Club Tijuana bit the shoulder of Jesus Zavela during a 4-3 defeat to "
            "Monterrey in the Mexican league, an act reminiscent of Luis Suarez's infamous "
            "behavior. Despite not being booked during the match, Arango faces the possibility "
            "of a significant retrospective ban for his actions. Earlier in the game, Arango had "
            "scored a stunning free kick to level the score after his team initially fell behind "
            "2-0.",
    "llama-3-70b-instruct": " Juan Arango, a Venezuelan footballer, bit an opponent, Jesus "
        "Zavela, during a Mexican league match between Club Tijuana and Monterrey . Arango's "
        "team lost 4-3, and he could face a retrospective ban for his actions, despite not "
        "being booked by the referee . Earlier in the game, Arango had scored a magnificent "
        "free kick to bring his team level after they fell 2-0 behind .",
    "mixtral-8x7b-instruct-v0.1": "Club Tijuana star Juan Arango bit the shoulder of Jesus "
        "Zavela in a game against Monterrey in the Mexican league . Arango was not booked by "
        "the referee but could face a heavy retrospective ban . Arango had earlier scored a "
        "magnificent free kick for his team in the 4-3 defeat.",
}
QAPYRAMID = {"bart": 1.0, "pegasus": 8 / 11, "brio": 9 / 11, "brio-ext": 10 / 11,
             "matchsum": 2 / 11, "mixtral-8x22b-instruct-v0.1": 1.0,
             "llama-3-8b-instruct": 8 / 11, "GPT4": 10 / 11, "llama-3-70b-instruct": 1.0,
             "mixtral-8x7b-instruct-v0.1": 1.0}
RELEASED_P_L = {"bart": 0.8194891881817862, "pegasus": 1.0, "brio": 0.9200444146293233,
                "brio-ext": 0.9243137546177594, "matchsum": 0.9459594689067655,
                "mixtral-8x22b-instruct-v0.1": 0.9372410104578182,
                "llama-3-8b-instruct": 0.8271122887042809, "GPT4": 0.8271122887042809,
                "llama-3-70b-instruct": 0.8425718855535911,
                "mixtral-8x7b-instruct-v0.1": 0.9286029058931803}
RELEASED_NQAPYRAMID = {"bart": 0.8194891881817862, "pegasus": 0.7272727272727273,
                       "brio": 0.7527636119694464, "brio-ext": 0.8402852314706903,
                       "matchsum": 0.171992630710321,
                       "mixtral-8x22b-instruct-v0.1": 0.9372410104578182,
                       "llama-3-8b-instruct": 0.6015362099667497, "GPT4": 0.7519202624584371,
                       "llama-3-70b-instruct": 0.8425718855535911,
                       "mixtral-8x7b-instruct-v0.1": 0.9286029058931803}
EXAMPLE = "000571afe702684d90c1d222ce70b1e1375c1016"


@pytest.mark.parametrize("text,repeated", [
    ("a b a b a b a b c", 6),            # "a b" 4 times in a row: 3 repeats x 2 words
    ("the the the", 0),                  # only 3 times: not "more than 3"
    ("the the the the", 3),
    ("It was great great great great great .", 4),
    ("Go go GO go", 3),                  # compared lower-cased
    ("a a a a a a a a", 7),              # n=1 covers 7 words, n=2 only 6
    ("x x x x y z z z z", 6),            # two separate runs
    ("a b a c a d a e", 0),              # not consecutive
    ("", 0),
])
def test_repetition_on_crafted_strings(text, repeated):
    words = text.split()
    assert sum(repeated_word_mask(words)) == repeated
    assert repetition_ratio(words) == (repeated / len(words) if words else 0.0)
    assert repetition_penalty(words) == 1 - repetition_ratio(words)


def test_repetition_mask_positions():
    assert repeated_word_mask("p a b a b a b a b".split()) == [False, False, False] + [True] * 6


def test_repeated_sentences_through_the_tokenizer():
    words = sentence_words("He said no. He said no. He said no. He said no.")
    assert len(words) == 16 and repetition_ratio(words) == 0.75


def test_length_penalty_by_hand():
    assert length_penalty(72, 36) == pytest.approx(math.exp(-1 / 6), abs=1e-15)
    assert length_penalty(72, 36, alpha=2) == pytest.approx(math.exp(-0.5), abs=1e-15)
    assert length_penalty(72, 36, p_r=0.5) == 1.0  # effective length 36
    assert length_penalty(20, 36) == 1.0            # shorter than the reference
    with pytest.raises(SumbenchError, match="no words"):
        length_penalty(10, 0)
    with pytest.raises(SumbenchError, match="alpha must be positive"):
        length_penalty(10, 5, alpha=0)


@pytest.mark.parametrize("system", sorted(SUMMARIES))
def test_released_length_penalties(system):
    result = penalties(SUMMARIES[system], REFERENCE)
    assert result.reference_words == 36 and result.p_r == 1.0
    assert result.p_l == pytest.approx(RELEASED_P_L[system], abs=1e-15)
    assert result.apply(QAPYRAMID[system]) == pytest.approx(RELEASED_NQAPYRAMID[system],
                                                             abs=1e-12)


def test_calibrate_alpha():
    scores, lengths, references = [0.2, 0.4, 0.6, 0.8], [10, 20, 30, 40], [10, 10, 10, 10]
    result = calibrate_alpha(scores, lengths, references)
    expected = {}
    for alpha in range(1, 11):
        adjusted = [s * math.exp(min(0, (1 - n / r) / alpha))
                    for s, n, r in zip(scores, lengths, references)]
        expected[alpha] = np.corrcoef(adjusted, lengths)[0, 1]
    assert result.correlations == {a: pytest.approx(r, abs=1e-12) for a, r in expected.items()}
    assert result.alpha == 2 and result.correlations[1] < 0 < result.correlations[3]
    assert calibrate_alpha(scores, lengths, references, alphas=[3, 9]).alpha == 3
    with pytest.raises(SumbenchError, match="no candidate alpha"):
        calibrate_alpha([0.5, 0.5], [10, 10], [10, 10])


def test_normalize_and_with_alpha():
    scores = {s: {EXAMPLE: q} for s, q in QAPYRAMID.items()}
    summaries = {(s, EXAMPLE): t for s, t in SUMMARIES.items()}
    references = {EXAMPLE: REFERENCE}
    table = normalize(scores, summaries, references)
    assert {s: rows[EXAMPLE]["nQAPyramid"] for s, rows in table.items()} == {
        s: pytest.approx(v, abs=1e-12) for s, v in RELEASED_NQAPYRAMID.items()}
    assert with_alpha(table, 2.0) == normalize(scores, summaries, references, alpha=2.0)
    with pytest.raises(SumbenchError, match="no summary or reference"):
        normalize({"bart": {"other": 1.0}}, summaries, references)


def write_inputs(tmp_path, scores):
    paths = {name: tmp_path / name for name in ("scores.json", "summaries.jsonl",
                                                 "references.jsonl")}
    paths["scores.json"].write_text(json.dumps(scores))
    paths["summaries.jsonl"].write_text("".join(
        json.dumps({"system": s, "example_id": EXAMPLE, "summary": t}) + "\n"
        for s, t in SUMMARIES.items()))
    paths["references.jsonl"].write_text(json.dumps({"example_id": EXAMPLE,
                                                     "reference": REFERENCE}) + "\n")
    return [str(paths[n]) for n in ("scores.json", "summaries.jsonl", "references.jsonl")]


def normalize_cli(capsys, files, *extra):
    code = main(["qapyramid", "normalize", "--scores", files[0], "--summaries", files[1],
                 "--references", files[2], *extra])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_cli_normalize_reproduces_released_values(tmp_path, capsys):
    files = write_inputs(tmp_path, {s: {EXAMPLE: q} for s, q in QAPYRAMID.items()})
    out = tmp_path / "out.json"
    code, stdout, _ = normalize_cli(capsys, files, "--out", str(out))
    assert code == 0
    report = json.loads(stdout)
    assert report["alpha"] == 6.0 and report["calibration"] is None
    assert report["n_examples"] == {s: 1 for s in QAPYRAMID}
    assert {s: v["nQAPyramid"] for s, v in report["systems"].items()} == {
        s: pytest.approx(v, abs=1e-12) for s, v in RELEASED_NQAPYRAMID.items()}
    written = json.loads(out.read_text())
    assert written["per_example"]["bart"][EXAMPLE]["words"] == 79
    assert "provenance" in written


def test_cli_normalize_accepts_a_human_report_and_calibrates(tmp_path, capsys):
    scores = {s: {EXAMPLE: q} for s, q in QAPYRAMID.items()}
    files = write_inputs(tmp_path, {"systems": {}, "per_example": scores})
    code, stdout, _ = normalize_cli(capsys, files, "--calibrate-alpha")
    assert code == 0
    report = json.loads(stdout)
    words = {s: len(sentence_words(t)) for s, t in SUMMARIES.items()}
    expected = calibrate_alpha([QAPYRAMID[s] for s in SUMMARIES],
                               [words[s] for s in SUMMARIES], [36] * len(SUMMARIES))
    assert report["alpha"] == expected.alpha == report["calibration"]["alpha"]
    assert set(report["calibration"]["correlations"]) == {str(a) for a in range(1, 11)}


def test_cli_normalize_errors(tmp_path, capsys):
    files = write_inputs(tmp_path, {"bart": {EXAMPLE: 1.0}, "t5": {EXAMPLE: 0.5}})
    code, _, stderr = normalize_cli(capsys, files)
    assert code == 2 and "no summary for system 't5'" in stderr and "summaries.jsonl" in stderr
    files = write_inputs(tmp_path, {"bart": {EXAMPLE: 1.5}})
    code, _, stderr = normalize_cli(capsys, files)
    assert code == 2 and "expected a score in [0, 1]" in stderr
    files = write_inputs(tmp_path, {"bart": {EXAMPLE: 1.0}})
    with open(files[1], "a") as handle:
        handle.write(json.dumps({"system": "bart", "example_id": EXAMPLE, "summary": "x"}) + "\n")
    code, _, stderr = normalize_cli(capsys, files)
    assert code == 2 and "summaries.jsonl:11" in stderr and "duplicate summary" in stderr
    with pytest.raises(SystemExit):
        normalize_cli(capsys, files, "--alpha", "3", "--calibrate-alpha")
    assert "not allowed with argument" in capsys.readouterr().err
