"""Pyramid scores: the known human REALSumm/PyrXSum values, the lexical and NLI backends
through the evaluator and the CLI, and the option checks."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from benchmark.cli import main
from benchmark.commands.options import PRESENCE_BACKENDS
from leaderboard.evaluators.pyramid.scoring import (
    backend_names,
    check_presence_options,
    evaluate_dataset,
    evaluate_system,
    lexical_threshold,
    presence_factory,
    pyramid_score,
    pyramid_scores,
    system_score,
)
from tasks.plumbing.errors import SumbenchError, UnknownNameError
from tasks.qapyramid.pyramid_data import load_pyramid_dataset

# shared/README.md: mean over examples of present SCUs / all SCUs (the Lite2-3Pyramid
# repository prints the same numbers as its "human" score).
REALSUMM_BART = 0.48349483849483854
PYRXSUM_T5 = 0.29117532467532464


def test_pyramid_score_by_hand():
    assert pyramid_score([1, 0, 1, 1]) == 0.75
    assert pyramid_score([0.2, 0.4]) == pytest.approx(0.3)
    assert pyramid_scores([[1, 1], [0, 1, 0, 0]]) == [1.0, 0.25]
    assert system_score([1.0, 0.25]) == 0.625


def test_a_reference_without_units_scores_0_and_counts_in_the_mean():
    # Lite²Pyramid's metric/score.py (cfa581a, lines 96-104): every summary starts at 0,
    # only those with units are scored, and np.mean runs over all summaries
    assert pyramid_score([]) == 0.0
    assert pyramid_scores([[1, 1], [], [0, 1]]) == [1.0, 0.0, 0.5]
    assert system_score(pyramid_scores([[1, 1], [], [0, 1]])) == 0.5


@pytest.mark.parametrize("folder,system,expected", [("realsumm", "abs_bart_out", REALSUMM_BART),
                                                    ("pyrxsum", "t5-large", PYRXSUM_T5)])
def test_known_human_values(pyramid_data_dir, folder, system, expected):
    data = load_pyramid_dataset(pyramid_data_dir / folder, systems=[system])
    result = evaluate_dataset(data, "scus", "human")[system]
    assert len(result.per_example) == 100
    assert result.score == pytest.approx(expected, abs=1e-12)


@pytest.mark.slow
def test_realsumm_all_systems(pyramid_data_dir):
    data = load_pyramid_dataset(pyramid_data_dir / "realsumm")
    scores = {s: r.score for s, r in evaluate_dataset(data, "scus", "human").items()}
    assert len(scores) == 25
    assert scores["ext_bart_out"] == pytest.approx(0.5367819541569542, abs=1e-12)
    assert max(scores, key=scores.get) == "abs_semsim_out"
    assert min(scores, key=scores.get) == "abs_bottom_up_out"


def test_any_presence_callable(pyramid_data_dir):
    data = load_pyramid_dataset(pyramid_data_dir / "pyrxsum", systems=["ptgen"])
    units = data.units["scus"]

    def half(summaries, example_units):
        return [[0.5] * len(u) for u in example_units]

    assert evaluate_system("ptgen", data.summaries["ptgen"], units, half).score == 0.5

    def wrong_shape(summaries, example_units):
        return [[1.0] for _ in example_units]

    with pytest.raises(SumbenchError, match="values for .* units"):
        evaluate_system("ptgen", data.summaries["ptgen"], units, wrong_shape)

    def out_of_range(summaries, example_units):
        return [[2.0] * len(u) for u in example_units]

    with pytest.raises(SumbenchError, match=r"in \[0, 1\]"):
        evaluate_system("ptgen", data.summaries["ptgen"], units, out_of_range)


def test_backend_lookup_and_option_checks():
    assert backend_names() == ["alignscore", "causal-lm", "chat", "human", "lexical",
                               "minicheck", "minicheck-chat", "nli", "seq2seq"]
    assert sorted(PRESENCE_BACKENDS) == backend_names()
    with pytest.raises(UnknownNameError, match="unknown presence backend 'humn'"):
        presence_factory("humn")
    assert check_presence_options("NLI", "stus", {"model": "m", "mode": "prob3"}) == "nli"
    assert check_presence_options("lexical", "sentences", {"threshold": None}) == "lexical"
    with pytest.raises(SumbenchError, match="does not take --nli-mode, --device"):
        check_presence_options("lexical", "scus", {"mode": "prob2", "device": "cpu"})
    with pytest.raises(SumbenchError, match=r"chat needs --model \(the model name"):
        check_presence_options("chat", "scus", {"cache": "c.sqlite"})


def test_human_presence_needs_scus(pyramid_data_dir):
    data = load_pyramid_dataset(pyramid_data_dir / "pyrxsum", systems=["ptgen"],
                                unit_kinds=("scus", "stus"))
    with pytest.raises(SumbenchError, match="needs --units scus, not stus"):
        evaluate_dataset(data, "stus", "human")


def run_cli(capsys, *argv):
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.slow
def test_cli_reproduces_known_values(pyramid_data_dir, capsys, tmp_path):
    out = tmp_path / "pyr.json"
    code, stdout, _ = run_cli(capsys, "pyramid", "--pyramid", str(pyramid_data_dir / "realsumm"),
                              "--units", "scus", "--presence", "human", "--out", str(out))
    assert code == 0
    scores = json.loads(stdout)
    assert len(scores) == 25 and scores["abs_bart_out"] == pytest.approx(REALSUMM_BART,
                                                                         abs=1e-12)
    written = json.loads(out.read_text())
    assert written["scores"] == scores and len(written["per_example"]["abs_bart_out"]) == 100
    assert written["config"]["presence"] == "human" and "provenance" in written
    code, stdout, _ = run_cli(capsys, "pyramid", "--pyramid", str(pyramid_data_dir / "pyrxsum"),
                              "--units", "scus", "--presence", "human", "--systems", "t5-large")
    assert code == 0 and json.loads(stdout) == {"t5-large": pytest.approx(PYRXSUM_T5,
                                                                           abs=1e-12)}


@pytest.mark.parametrize("argv,message", [
    (["--units", "stus", "--presence", "human"], "--presence human needs --units scus"),
    (["--units", "sentences", "--presence", "human"], "--presence human needs --units scus"),
    (["--units", "scus", "--presence", "human", "--threshold", "0.5"],
     "--presence human does not take --threshold"),
    # no --model: Lite²Pyramid's default model, which is not there offline
    (["--units", "sentences", "--presence", "nli"], "cannot load "
     "AutoModelForSequenceClassification from 'shiyue/roberta-large-tac08'"),
    (["--units", "scus", "--presence", "lexical", "--model", "m"],
     "--presence lexical does not take --model (it takes: --threshold)"),
    (["--units", "scus", "--presence", "lexical", "--device", "cpu"],
     "--presence lexical does not take --device (it takes: --threshold)"),
    (["--units", "scus", "--presence", "chat", "--model", "m", "--batch-size", "4"],
     "--presence chat does not take --batch-size (it takes: --model, --cache)"),
    (["--units", "stus", "--presence", "nli", "--model", "/no/such/model"],
     "model path /no/such/model does not exist"),
    (["--units", "scus", "--presence", "lexical", "--systems", "t5-larg"],
     "unknown system 't5-larg'; did you mean 't5-large'?"),
])
def test_cli_rejects_bad_combinations(pyramid_data_dir, capsys, argv, message):
    code, stdout, stderr = run_cli(capsys, "pyramid", "--pyramid",
                                   str(pyramid_data_dir / "pyrxsum"), *argv)
    assert code == 2 and stdout == "" and message in stderr


def test_cli_data_errors(tmp_path, capsys):
    code, _, stderr = run_cli(capsys, "pyramid", "--pyramid", str(tmp_path / "missing"),
                              "--units", "scus", "--presence", "human")
    assert code == 2 and "Pyramid data folder not found" in stderr


# ---- automatic presence: lexical ------------------------------------------------------------
REALSUMM_THRESHOLD = 0.5714285714285714  # test_presence_backends.py calibrates the same
REALSUMM_BART_LEXICAL = 0.514703157953158


@pytest.mark.slow
def test_cli_lexical_on_realsumm_scus(pyramid_data_dir, capsys, tmp_path):
    """Default threshold: calibrated on the train split's human SCU labels (all systems)."""
    folder = pyramid_data_dir / "realsumm"
    out = tmp_path / "lexical.json"
    code, stdout, stderr = run_cli(capsys, "pyramid", "--pyramid", str(folder), "--units",
                                   "scus", "--presence", "lexical", "--out", str(out))
    assert code == 0 and f"lexical threshold {REALSUMM_THRESHOLD!r}" in stderr
    scores = json.loads(stdout)
    assert len(scores) == 25 and all(0 < value < 1 for value in scores.values())
    assert scores["abs_bart_out"] == pytest.approx(REALSUMM_BART_LEXICAL, abs=1e-12)
    config = json.loads(out.read_text())["config"]
    assert config["options"] == {"threshold": REALSUMM_THRESHOLD}
    assert config["threshold_source"].startswith("calibrated")
    assert lexical_threshold(folder) == REALSUMM_THRESHOLD  # independent of --systems
    code, stdout, _ = run_cli(capsys, "pyramid", "--pyramid", str(folder), "--units", "scus",
                              "--presence", "lexical", "--systems", "abs_bart_out",
                              "--threshold", "0.9")
    assert code == 0 and json.loads(stdout)["abs_bart_out"] < REALSUMM_BART_LEXICAL - 0.1


@pytest.mark.slow
def test_cli_lexical_records_its_calibration_and_scores_held_out_splits(pyramid_data_dir,
                                                                        capsys, tmp_path):
    """The default threshold is fitted on the train examples' human labels: the output says
    which; --score-split validation/test scores only held-out examples (the same per-example
    scores as in the full run), and the default (all) keeps the published numbers."""
    from tasks.qapyramid.dataset import split_of

    folder, out = pyramid_data_dir / "realsumm", tmp_path / "all.json"
    args = ["pyramid", "--pyramid", str(folder), "--units", "scus", "--presence", "lexical",
            "--systems", "abs_bart_out", "--out", str(out)]
    code, stdout, stderr = run_cli(capsys, *args)
    assert code == 0 and json.loads(stdout) == {"abs_bart_out": pytest.approx(
        REALSUMM_BART_LEXICAL, abs=1e-12)}
    full = json.loads(out.read_text())
    train = [i for i in full["ids"] if split_of(i) == "train"]
    assert len(full["ids"]) == 100 and 45 < len(train) < 75
    assert full["calibration"] == {"split": "train", "seed": 0, "n_examples": len(train),
                                   "example_ids": train, "threshold": REALSUMM_THRESHOLD,
                                   "scored_examples_used": len(train)}
    assert full["config"]["score_split"] == "all"
    assert (f"note: {len(train)} of the 100 scored examples are the train examples the "
            f"lexical threshold was calibrated on") in stderr
    position = {example_id: k for k, example_id in enumerate(full["ids"])}
    for split in ("validation", "test"):
        code, stdout, stderr = run_cli(capsys, *args, "--score-split", split)
        assert code == 0 and "note:" not in stderr
        held_out = json.loads(out.read_text())
        assert held_out["ids"] == [i for i in full["ids"] if split_of(i) == split]
        expected = [full["per_example"]["abs_bart_out"][position[i]] for i in held_out["ids"]]
        assert held_out["per_example"]["abs_bart_out"] == expected
        assert json.loads(stdout)["abs_bart_out"] == pytest.approx(
            sum(expected) / len(expected), abs=1e-12)
        assert held_out["calibration"]["scored_examples_used"] == 0
        assert held_out["calibration"]["example_ids"] == train
    code, stdout, stderr = run_cli(capsys, "pyramid", "--pyramid", str(folder), "--units", "scus",
                                   "--presence", "human", "--systems", "abs_bart_out",
                                   "--score-split", "train", "--out", str(out))
    human = json.loads(out.read_text())
    assert code == 0 and "note:" not in stderr and human["calibration"] is None
    assert human["ids"] == train and len(human["per_example"]["abs_bart_out"]) == len(train)


@pytest.fixture
def small_folder(tmp_path):
    """Two examples, one system, no labels/ (so no calibration is possible)."""
    root = tmp_path / "small"
    (root / "summaries").mkdir(parents=True)
    files = {"ids.txt": "e1\ne2\n", "documents.txt": "d1\nd2\n",
             "references.txt": "Police arrested three men in London.\nThe team won the cup.\n",
             "SCUs.txt": "Police arrested three men\tThe arrest was in London\n"
                         "The team won the cup\n",
             "STUs.txt": "Police arrested men\tThe men were three\nThe team won\n",
             "summaries/sys.summary": "Police questioned two men in London.\nThe team lost.\n"}
    for name, text in files.items():
        (root / name).write_text(text)
    return root


@pytest.mark.parametrize("units,expected", [
    # content-token recall, present iff >= 0.5:
    # scus: {police,arrested,three,men} 2/4, {arrest,london} 1/2 -> 1.0; {team,won,cup} 1/3 -> 0
    ("scus", 0.5),
    # stus: {police,arrested,men} 2/3, {men,three} 1/2 -> 1.0; {team,won} 1/2 -> 1.0
    ("stus", 1.0),
    # sentences: {police,arrested,three,men,london} 3/5 -> 1.0; {team,won,cup} 1/3 -> 0
    ("sentences", 0.5),
])
def test_cli_lexical_every_unit_kind_by_hand(small_folder, capsys, units, expected):
    code, stdout, _ = run_cli(capsys, "pyramid", "--pyramid", str(small_folder), "--units", units,
                              "--presence", "lexical", "--threshold", "0.5")
    assert code == 0 and json.loads(stdout) == {"sys": pytest.approx(expected)}


def test_cli_lexical_without_labels_needs_a_threshold(small_folder, capsys):
    code, stdout, stderr = run_cli(capsys, "pyramid", "--pyramid", str(small_folder), "--units",
                                   "stus", "--presence", "lexical")
    assert code == 2 and stdout == ""
    assert "no human SCU labels in the train split" in stderr and "--threshold" in stderr
    code, _, stderr = run_cli(capsys, "pyramid", "--pyramid", str(small_folder), "--units",
                              "stus", "--presence", "lexical", "--threshold", "0.5",
                              "--score-split", "validation")
    assert code == 2 and "no examples in the validation split" in stderr


# ---- automatic presence: NLI ----------------------------------------------------------------
def _nli_expected(model_dir, summaries, units) -> float:
    """Lite²Pyramid's p2c computed its way, pair by pair, unpadded: mean over examples of
    the mean of softmax([entailment logit, sum of the other logits])[0], pairs truncated at
    400 tokens."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    model = AutoModelForSequenceClassification.from_pretrained(str(model_dir)).eval()
    entail = model.config.label2id["entailment"]
    per_example = []
    with torch.no_grad():
        for summary, row in zip(summaries, units):
            probabilities = []
            for unit in row:
                logits = model(**tokenizer(summary, unit, truncation=True, max_length=400,
                                           return_tensors="pt")).logits[0]
                two = torch.stack([logits[entail], logits.sum() - logits[entail]])
                probabilities.append(torch.softmax(two, -1)[0].item())
            per_example.append(sum(probabilities) / len(probabilities))
    return sum(per_example) / len(per_example)


@pytest.mark.slow
def test_cli_nli_with_a_tiny_classifier_on_sentences(pyramid_data_dir, capsys, tmp_path):
    from trainers.models.tiny import build_tiny_classifier, build_tiny_tokenizer

    folder = pyramid_data_dir / "pyrxsum"
    systems = ["ptgen", "t5-large"]
    data = load_pyramid_dataset(folder, systems=systems, unit_kinds=("sentences",),
                                labels=False)
    texts = [*data.references[:30], *data.summaries["ptgen"][:30]]
    tokenizer = build_tiny_tokenizer(texts, vocab_size=500)
    build_tiny_classifier(tokenizer, labels=("contradiction", "entailment", "neutral"),
                          save_dir=tmp_path / "nli", seed=5)
    code, stdout, _ = run_cli(capsys, "pyramid", "--pyramid", str(folder), "--units", "sentences",
                              "--presence", "nli", "--model", str(tmp_path / "nli"),
                              "--systems", *systems, "--batch-size", "7",
                              "--out", str(tmp_path / "out.json"))
    assert code == 0
    scores = json.loads(stdout)
    assert list(scores) == systems
    backend = json.loads((tmp_path / "out.json").read_text())["config"]["presence_backend"]
    assert backend["fingerprint"].startswith(f"nli:{tmp_path / 'nli'}@files:")
    assert backend["fingerprint"].endswith(":max_length=400")
    for system in systems:
        expected = _nli_expected(tmp_path / "nli", data.summaries[system],
                                 data.units["sentences"])
        assert scores[system] == pytest.approx(expected, abs=1e-6)
    assert scores["ptgen"] != pytest.approx(scores["t5-large"], abs=1e-6)


@pytest.mark.slow
def test_human_presence_imports_no_model_library(pyramid_data_dir):
    """`--presence human` (and importing the presence module) loads neither torch nor the
    model backends; the model backends' names are still importable from presence."""
    code = ("import sys\n"
            "from benchmark.cli import main\n"
            f"assert main(['pyramid', '--data', {str(pyramid_data_dir / 'pyrxsum')!r}, "
            "'--units', 'scus', '--presence', 'human', '--systems', 'ptgen']) == 0\n"
            "import leaderboard.evaluators.pyramid.presence as presence\n"
            "heavy = [m for m in ('torch', 'transformers', 'leaderboard.evaluators."
            "presence_models') if m in sys.modules]\n"
            "assert not heavy, heavy\n"
            "from leaderboard.evaluators.pyramid.presence import NLIBackend\n"
            "assert NLIBackend.name == 'nli'\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    data = load_pyramid_dataset(pyramid_data_dir / "pyrxsum", systems=["ptgen"])
    expected = evaluate_dataset(data, "scus", "human")["ptgen"].score
    assert json.loads(result.stdout) == {"ptgen": pytest.approx(expected, abs=1e-12)}


@pytest.mark.slow
def test_cli_nli_entailment_label(small_folder, capsys, tmp_path):
    """A two-class checkpoint named refuted/supported: --entailment-label picks the class;
    the two choices' probabilities add up to 1 for every pair, so the scores too."""
    from trainers.models.tiny import build_tiny_classifier, build_tiny_tokenizer

    texts = [line for name in ("references.txt", "STUs.txt", "summaries/sys.summary")
             for line in (small_folder / name).read_text().splitlines()]
    tokenizer = build_tiny_tokenizer(texts * 5, vocab_size=300)
    build_tiny_classifier(tokenizer, labels=("refuted", "supported"),
                          save_dir=tmp_path / "nli", seed=2)
    base = ["pyramid", "--pyramid", str(small_folder), "--units", "stus", "--presence", "nli",
            "--model", str(tmp_path / "nli")]
    code, stdout, stderr = run_cli(capsys, *base)
    assert code == 2 and "no single 'entailment' label" in stderr
    assert "--entailment-label" in stderr
    out = tmp_path / "scores.json"
    code, stdout, _ = run_cli(capsys, *base, "--entailment-label", "Supported", "--out",
                              str(out))
    assert code == 0
    supported = json.loads(stdout)["sys"]
    assert json.loads(out.read_text())["config"]["options"]["entailment_label"] == "Supported"
    code, stdout, _ = run_cli(capsys, *base, "--entailment-label", "REFUTED")
    assert code == 0
    refuted = json.loads(stdout)["sys"]
    assert supported + refuted == pytest.approx(1.0, abs=1e-9)
    assert supported != pytest.approx(0.5, abs=1e-6)


def test_entailment_label_is_an_nli_option():
    assert check_presence_options("nli", "scus", {"model": "m",
                                                  "entailment_label": "supported"}) == "nli"
    with pytest.raises(SumbenchError, match="does not take --entailment-label"):
        check_presence_options("seq2seq", "scus", {"model": "m", "entailment_label": "x"})


def test_backend_option_check_is_shared_with_qapyramid(capsys):
    """`sumbench pyramid` and `sumbench qapyramid` check backend options with one function
    and take their --presence choices from the one registry; qapyramid refuses the human
    labels, which only Pyramid sets have, before reading anything."""
    from benchmark.cli import build_parser
    from leaderboard.evaluators.pyramid.scoring import check_backend_options, text_backend_names

    assert text_backend_names() == ["lexical", "nli", "seq2seq", "causal-lm", "chat",
                                    "minicheck", "alignscore", "minicheck-chat"]
    assert check_backend_options("Lexical", {"threshold": 0.3, "model": None}) == "lexical"
    with pytest.raises(SumbenchError, match=r"lexical does not take --model \(it takes: "):
        check_backend_options("lexical", {"model": "m"})
    with pytest.raises(SumbenchError, match="seq2seq needs --model"):
        check_backend_options("seq2seq", {"model": None, "entailment_label": None})
    parser = build_parser()
    args = parser.parse_args(["qapyramid", "semi-auto", "--dataset", "d", "--presence", "chat"])
    assert args.presence == "chat"
    from benchmark.cli import main

    for command in ("semi-auto", "auto"):
        extra = ["--qa-model", "m"] if command == "auto" else []
        assert main(["qapyramid", command, "--dataset", "missing.jsonl", *extra, "--presence",
                     "human"]) == 2
        assert "--presence human needs a Pyramid set's SCU labels" in capsys.readouterr().err
