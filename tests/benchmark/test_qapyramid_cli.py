"""`sumbench qapyramid semi-auto` and `auto` on a small made-up dataset-format file.

Lexical presence (threshold 0.5) by hand: content tokens of the units and summaries are
listed in DATASET's comments; a QA is present when at least half its tokens are in the summary.
"""
from __future__ import annotations

import json
import math

import pytest

from benchmark.cli import main

pytestmark = pytest.mark.usefixtures("one_torch_thread")

E1_QAS = ["Who chased something? the cat",                      # {chased, cat}
          "What did someone chase? a red ball",                 # {chase, red, ball}
          "Where did someone chase something? in the garden"]   # {chase, garden}
E2_QAS = ["Who opened something? Maria",                        # {opened, maria}
          "What did someone open? a bakery",                    # {open, bakery}
          "Where did someone open something? in Lisbon"]        # {open, lisbon}
E3_QAS = ["Who approved something? the council",                # {approved, council}
          "What did someone approve? the new budget"]           # {approve, new, budget}
DATASET = [
    {"example_id": "e1", "source": "A made-up story about a cat.",
     "reference": "The cat chased a red ball in the garden.",  # 10 words
     "QAs": E1_QAS,
     "QA_labels": {"A": [1, 1, 1], "B": [1, 1, 0], "C": [1, 0, 1]},
     "system_outputs": {"A": "The cat chased a red ball in the garden.",  # 1, 1, 1
                        "B": "A dog chased the ball.",  # 1/2, 1/3, 0 -> 1, 0, 0
                        "C": "A cat slept in the garden."}},  # 1/2, 0, 1/2 -> 1, 0, 1
    {"example_id": "e2", "source": "A made-up story about a bakery.",
     "reference": "Maria opened a bakery in Lisbon.",  # 7 words
     "QAs": E2_QAS,
     "QA_labels": {"A": [1, 0, 0], "B": [1, 1, 1], "C": [1, 0, 0]},
     "system_outputs": {"A": "Maria opened a shop.",  # 1, 0, 0
                        "B": "A bakery in Lisbon was opened by Maria.",  # 1, 1, 1; 9 words
                        # 1/2, 0, 0 -> 1, 0, 0; "bread" 4 times in a row: p_r = 4/7
                        "C": "Maria sold bread bread bread bread."}},
    {"example_id": "e3", "source": "A made-up story about a budget.",
     "reference": "The council approved the new budget on Monday.",  # 9 words
     "QAs": E3_QAS,
     "QA_labels": {"A": [0, 1], "B": [1, 0], "C": [1, 1]},
     "system_outputs": {  # A: 1/2, 1/3 -> 1, 0; 17 words
         "A": "The budget was approved after a very long debate that lasted many hours in "
              "the hall.",
         "B": "Nobody met on Monday.",  # 0, 0
         "C": "The council approved a new budget."}},  # 1, 2/3 -> 1, 1
]
AUTO = {"A": (1 + 1 / 3 + 1 / 2) / 3, "B": (1 / 3 + 1 + 0) / 3, "C": (2 / 3 + 1 / 3 + 1) / 3}
HUMAN = {"A": (1 + 1 / 3 + 1 / 2) / 3, "B": (2 / 3 + 1 + 1 / 2) / 3, "C": (2 / 3 + 1 / 3 + 1) / 3}
# automatic C > A > B, human B > C > A: 1 concordant pair (A, C), 2 discordant -> -1/3
TAU = -1 / 3
# p_l = exp(min(0, (1 - |s| p_r / |r|) / 6)): A on e3 17/9 words, B on e2 9/7; C on e2 p_r 4/7
PL_A3, PL_B2, PR_C2 = math.exp((1 - 17 / 9) / 6), math.exp((1 - 9 / 7) / 6), 4 / 7
N_AUTO = {"A": (1 + 1 / 3 + PL_A3 / 2) / 3, "B": (1 / 3 + PL_B2 + 0) / 3,
          "C": (2 / 3 + PR_C2 / 3 + 1) / 3}
N_HUMAN = {"A": N_AUTO["A"], "B": (2 / 3 + PL_B2 + 1 / 2) / 3, "C": N_AUTO["C"]}


#: `qapyramid auto` with sumbench's own QA generation (the default is QASem's)
OWN_AUTO = ("auto", "--qa-generator", "sumbench")


def approx(mapping: dict) -> dict:
    return {key: pytest.approx(value, abs=1e-12) for key, value in mapping.items()}


@pytest.fixture()
def dataset(tmp_path):
    path = tmp_path / "qapyramid.jsonl"
    path.write_text("".join(json.dumps(record) + "\n" for record in DATASET))
    return path


@pytest.fixture(scope="module")
def tiny_t5(tmp_path_factory):
    """A tiny random T5 (seeded) and its tokenizer, saved to a folder. Greedy decoding of the
    random model repeats the pad token (empty text); the pad's output row is zeroed so that it
    emits words instead (nonsense, which is all these tests need)."""
    import torch

    from trainers.models.tiny import build_tiny_t5, build_tiny_tokenizer

    folder = tmp_path_factory.mktemp("tiny-t5")
    texts = [r["reference"] for r in DATASET] + [qa for r in DATASET for qa in r["QAs"]]
    tokenizer = build_tiny_tokenizer(texts * 10, vocab_size=400)
    model = build_tiny_t5(tokenizer, seed=0)
    with torch.no_grad():
        model.lm_head.weight[tokenizer.pad_token_id].zero_()
    model.save_pretrained(str(folder))
    tokenizer.save_pretrained(str(folder))
    return folder


def run_json(capsys, *argv: str) -> dict:
    assert main(["qapyramid", *argv]) == 0
    return json.loads(capsys.readouterr().out)


def test_semi_auto_lexical_scores_by_hand(dataset, capsys, tmp_path):
    out = tmp_path / "semi.json"
    report = run_json(capsys, "semi-auto", "--dataset", str(dataset), "--presence", "lexical",
                      "--out", str(out))
    assert report["systems"] == approx(AUTO)
    assert report["human"] == approx(HUMAN)
    assert report["kendall_tau"] == pytest.approx(TAU, abs=1e-12)
    assert report["n_examples"] == report["n_human_examples"] == {"A": 3, "B": 3, "C": 3}
    assert "nQAPyramid" not in report and "alpha" not in report
    written = json.loads(out.read_text())
    assert written["per_example"]["B"] == approx({"e1": 1 / 3, "e2": 1.0, "e3": 0.0})
    assert written["human_per_example"]["C"] == approx({"e1": 2 / 3, "e2": 1 / 3, "e3": 1.0})
    assert written["config"]["presence"] == "lexical" and written["config"]["qas"] == "gold"
    assert written["provenance"]["config"] == written["config"]
    assert "packages" in written["provenance"] and "git" in written["provenance"]


def test_semi_auto_normalize(dataset, capsys):
    report = run_json(capsys, "semi-auto", "--dataset", str(dataset), "--presence", "lexical",
                      "--normalize")
    assert report["alpha"] == 6.0
    assert report["systems"] == approx(AUTO)
    assert report["nQAPyramid"] == approx(N_AUTO)
    assert report["human_nQAPyramid"] == approx(N_HUMAN)
    # normalized: automatic C > A > B, human B > C > A
    assert report["kendall_tau_nQAPyramid"] == pytest.approx(-1 / 3, abs=1e-12)
    report = run_json(capsys, "semi-auto", "--dataset", str(dataset), "--presence", "lexical",
                      "--normalize", "--alpha", "1")
    assert report["nQAPyramid"]["A"] == pytest.approx(
        (1 + 1 / 3 + math.exp(1 - 17 / 9) / 2) / 3, abs=1e-12)


def test_semi_auto_threshold_and_systems(dataset, capsys):
    # threshold 0.7: A keeps e1 QA1 and e2 QA1 only; C keeps e3 QA1 only
    report = run_json(capsys, "semi-auto", "--dataset", str(dataset), "--presence", "lexical",
                      "--threshold", "0.7", "--systems", "A", "C")
    assert report["systems"] == approx({"A": (1 / 3 + 1 / 3 + 0) / 3, "C": (0 + 0 + 1 / 2) / 3})
    assert report["human"] == approx({"A": HUMAN["A"], "C": HUMAN["C"]})
    assert report["kendall_tau"] == pytest.approx(-1.0)  # automatic A > C, human C > A
    soft = run_json(capsys, "semi-auto", "--dataset", str(dataset), "--presence", "lexical",
                    "--use", "probability", "--systems", "A")
    assert soft["systems"]["A"] == pytest.approx(
        ((1 + 2 / 3 + 1 / 2) / 3 + (1 + 0 + 0) / 3 + (1 / 2 + 1 / 3) / 2) / 3, abs=1e-12)


def test_semi_auto_without_labels_has_no_human_keys(tmp_path, capsys):
    path = tmp_path / "unlabelled.jsonl"
    path.write_text("".join(json.dumps({k: v for k, v in r.items() if k != "QA_labels"}) + "\n"
                            for r in DATASET))
    report = run_json(capsys, "semi-auto", "--dataset", str(path), "--presence", "lexical")
    assert report["systems"] == approx(AUTO)
    assert "human" not in report and "kendall_tau" not in report


def test_semi_auto_names_examples_without_qas_and_scores_no_system_on_them(dataset, tmp_path,
                                                                          capsys):
    path = tmp_path / "no-qas.jsonl"
    records = [dict(r, QAs=[], QA_labels={s: [] for s in r["QA_labels"]})
               if r["example_id"] == "e2" else r for r in DATASET]
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    assert main(["qapyramid", "semi-auto", "--dataset", str(path), "--presence", "lexical"]) == 0
    captured = capsys.readouterr()
    report = json.loads(captured.out)
    assert report["examples_without_qas"] == ["e2"]
    assert report["n_examples"] == {"A": 2, "B": 2, "C": 2}
    assert report["systems"] == approx({"A": (1 + 1 / 2) / 2, "B": (1 / 3 + 0) / 2,
                                        "C": (2 / 3 + 1) / 2})
    assert ("sumbench qapyramid: note: 1 of 3 examples have no gold QAs and are scored for no "
            "system (first: 'e2'") in captured.err
    full = run_json(capsys, "semi-auto", "--dataset", str(dataset), "--presence", "lexical")
    assert full["examples_without_qas"] == [] and full["n_examples"]["A"] == 3


def test_auto_with_a_tiny_t5(dataset, tiny_t5, capsys, tmp_path):
    out = tmp_path / "auto.json"
    report = run_json(capsys, *OWN_AUTO, "--dataset", str(dataset), "--qa-model", str(tiny_t5),
                      "--max-new-tokens", "12", "--presence", "lexical", "--normalize",
                      "--predicates", "gold", "--out", str(out))
    assert set(report) >= {"systems", "n_examples", "nQAPyramid", "human", "kendall_tau",
                           "examples_without_qas"}
    assert set(report["systems"]) <= {"A", "B", "C"} and report["systems"]
    assert all(0.0 <= value <= 1.0 for value in report["systems"].values())
    assert report["human"] == approx(HUMAN)  # over all labelled examples, whatever was generated
    written = json.loads(out.read_text())
    assert set(written["qas"]) == {"e1", "e2", "e3"}
    assert all(isinstance(q, str) and isinstance(a, str)
               for qas in written["qas"].values() for q, a in qas)
    assert sorted(e for e, qas in written["qas"].items() if not qas) == \
        report["examples_without_qas"]
    assert written["config"]["qa_model"] == str(tiny_t5)
    assert written["config"]["predicates"] == "gold"
    assert report["predicates"] == "oracle predicates (the gold QAs' predicate words)"
    assert written["config"]["predicate_source"] == report["predicates"]


def test_auto_with_a_model_presence_backend_and_predicates_file(dataset, tiny_t5, capsys,
                                                                 tmp_path):
    predicates = tmp_path / "predicates.json"
    predicates.write_text(json.dumps({"e1": ["chased", "ball"], "e2": [], "e3": ["approved"]}))
    out = tmp_path / "auto.json"
    # threshold 0: every generated QA counts as present, so each scored summary scores 1
    report = run_json(capsys, *OWN_AUTO, "--dataset", str(dataset), "--qa-model", str(tiny_t5),
                      "--max-new-tokens", "8", "--predicates", str(predicates),
                      "--presence", "seq2seq", "--model", str(tiny_t5), "--threshold", "0",
                      "--out", str(out))
    written = json.loads(out.read_text())
    assert written["qas"]["e2"] == [] and "e2" in report["examples_without_qas"]
    scored = {e for e, qas in written["qas"].items() if qas}
    assert report["systems"] == {s: 1.0 for s in ("A", "B", "C")}
    assert report["kendall_tau"] is None  # automatic scores all tie
    assert report["human"] == approx(HUMAN)
    assert report["n_examples"] == {s: len(scored) for s in ("A", "B", "C")}
    assert all(set(rows) == scored for rows in written["per_example"].values())


@pytest.fixture(scope="module")
def refuted_supported_nli(tmp_path_factory):
    """A tiny two-class classifier whose labels are refuted / supported (no "entailment")."""
    from trainers.models.tiny import build_tiny_classifier, build_tiny_tokenizer

    folder = tmp_path_factory.mktemp("nli")
    texts = [r["reference"] for r in DATASET] + [qa for r in DATASET for qa in r["QAs"]] + \
        [text for r in DATASET for text in r["system_outputs"].values()]
    build_tiny_classifier(build_tiny_tokenizer(texts * 10, vocab_size=400),
                          labels=("refuted", "supported"), save_dir=folder, seed=1)
    return folder


def test_semi_auto_nli_entailment_label(dataset, refuted_supported_nli, capsys, tmp_path):
    """--entailment-label picks the class; with two classes p(supported) + p(refuted) = 1 for
    each QA, so the probability QAPyramid scores of the two choices add up to 1."""
    base = ["semi-auto", "--dataset", str(dataset), "--presence", "nli", "--model",
            str(refuted_supported_nli), "--use", "probability"]
    assert main(["qapyramid", *base]) == 2
    assert "no single 'entailment' label" in capsys.readouterr().err
    out = tmp_path / "supported.json"
    supported = run_json(capsys, *base, "--entailment-label", "SUPPORTED", "--out", str(out))
    refuted = run_json(capsys, *base, "--entailment-label", "refuted")
    config = json.loads(out.read_text())["config"]
    assert config["entailment_label"] == "SUPPORTED"
    assert config["presence_backend"]["fingerprint"].startswith(
        f"nli:{refuted_supported_nli}@files:")
    for system in ("A", "B", "C"):
        assert supported["systems"][system] + refuted["systems"][system] == \
            pytest.approx(1.0, abs=1e-9)
    assert len({round(value, 9) for value in supported["systems"].values()}) == 3


@pytest.mark.parametrize("extra,message", [
    (["--presence", "lexical", "--systems", "A", "Z"],
     "qapyramid.jsonl: unknown system 'Z' (known: A, B, C)"),
    (["--presence", "lexical", "--entailment-label", "yes"],
     "--presence lexical does not take --entailment-label"),
    (["--presence", "seq2seq", "--model", "m", "--entailment-label", "yes"],
     "--presence seq2seq does not take --entailment-label"),
    (["--presence", "nli"], "cannot load AutoModelForSequenceClassification from "
     "'shiyue/roberta-large-tac08'"),  # Lite²Pyramid's default model, not there offline
    (["--presence", "chat"], "--presence chat needs --model (the model name served"),
    (["--presence", "lexical", "--model", "x"],
     "--presence lexical does not take --model (it takes: --threshold)"),
    (["--presence", "lexical", "--device", "cpu"],
     "--presence lexical does not take --device (it takes: --threshold)"),
    (["--presence", "chat", "--model", "m", "--batch-size", "4"],
     "--presence chat does not take --batch-size (it takes: --model, --cache)"),
    (["--presence", "lexical", "--alpha", "2"], "--alpha needs --normalize"),
    (["--presence", "lexical", "--threshold", "1.5"],
     "argument --threshold: must be in [0, 1], got 1.5"),  # refused by the option's type
    (["--presence", "nli", "--model", "/nonexistent/nli"],
     "model path /nonexistent/nli does not exist"),
])
def test_semi_auto_errors(dataset, tmp_path, capsys, extra, message):
    out = tmp_path / "never.json"
    try:
        code = main(["qapyramid", "semi-auto", "--dataset", str(dataset), *extra,
                     "--out", str(out)])
    except SystemExit as stop:  # an option's type refused the value (argparse)
        code = stop.code
    assert code == 2
    error = capsys.readouterr().err
    assert message in error and error.startswith("sumbench qapyramid")
    assert len(error.strip().splitlines()) == 1
    assert not out.exists()


def test_missing_dataset_and_bad_inputs(tmp_path, dataset, capsys):
    missing = tmp_path / "missing.jsonl"
    assert main(["qapyramid", "semi-auto", "--dataset", str(missing),
                 "--presence", "lexical"]) == 2
    assert f"{missing}: dataset file not found" in capsys.readouterr().err
    assert main(["qapyramid", *OWN_AUTO, "--dataset", str(dataset), "--qa-model",
                 str(tmp_path / "no-model"), "--presence", "lexical"]) == 2
    assert "needs predicates: --predicate-model NAME" in capsys.readouterr().err
    assert main(["qapyramid", *OWN_AUTO, "--dataset", str(dataset), "--qa-model",
                 str(tmp_path / "no-model"), "--presence", "lexical",
                 "--predicates", "gold"]) == 2
    assert "--qa-model: model path" in capsys.readouterr().err
    predicates = tmp_path / "predicates.json"
    predicates.write_text(json.dumps({"e1": ["chased"], "e2": ["opened"]}))
    assert main(["qapyramid", *OWN_AUTO, "--dataset", str(dataset), "--qa-model",
                 str(tmp_path / "unused"), "--predicates", str(predicates),
                 "--presence", "lexical"]) == 2  # the model is loaded after the predicates
    assert "field 'e3': expected a list of predicate words" in capsys.readouterr().err


# ---- a repeated verb: one QA generation per gold predicate group -------------------------
REPEATED_REFERENCE = "Maria opened a bakery and later opened a cafe that sold bread."
REPEATED_QAS = ["Who opened something? Maria", "What did someone open? a bakery",
                "Who opened something? Maria", "What did someone open? a cafe",
                "What sold something? a cafe", "What did something sell? bread"]


@pytest.fixture(scope="module")
def predicate_copier(tmp_path_factory):
    """A hand-wired T5 whose first generated token is the quoted predicate of a qa_generation
    prompt ("opened" or "sold": single tokens without a leading space). Every block adds
    nothing (zero output projections) except the decoder's cross-attention, which averages
    the encoder states uniformly (zero queries and keys) and moves word k's input dimension k
    to dimension 8 + k, which only word k's (tied) embedding row reads back."""
    import torch

    from tasks.qapyramid.qa_generation import QAGeneration
    from trainers.models.tiny import build_tiny_t5, build_tiny_tokenizer

    words = ("opened", "sold")
    prompts = [QAGeneration.source_text(REPEATED_REFERENCE, word) for word in words]
    tokenizer = build_tiny_tokenizer(prompts * 50, vocab_size=400)
    ids = [tokenizer.convert_tokens_to_ids(word) for word in words]
    assert [tokenizer.tokenize(text).count(word) for text, word in zip(prompts, words)] == [1, 1]
    model = build_tiny_t5(tokenizer, seed=0)
    with torch.no_grad():
        for block in [*model.encoder.block, *model.decoder.block]:
            for layer in block.layer:
                for name, weight in layer.named_parameters():
                    if name.endswith(("o.weight", "wo.weight", "q.weight", "k.weight")):
                        weight.zero_()
        cross = model.decoder.block[0].layer[1].EncDecAttention
        cross.v.weight.copy_(torch.eye(*cross.v.weight.shape))
        model.shared.weight.zero_()
        model.shared.weight[tokenizer.pad_token_id, 63] = 0.01  # the decoder's start
        for k, token in enumerate(ids):
            model.shared.weight[token, k] = model.shared.weight[token, 8 + k] = 1.0
            cross.o.weight[8 + k, k] = 1.0
    folder = tmp_path_factory.mktemp("copier")
    model.save_pretrained(str(folder))
    tokenizer.save_pretrained(str(folder))
    return folder


def test_auto_generates_a_repeated_verb_once_per_predicate(tmp_path, predicate_copier, capsys):
    """"opened" is two gold predicates: generated for twice, it counts twice in the
    denominator, as the gold QAs do: 2 of 3 QAs present (each word once would give 1/2)."""
    path = tmp_path / "repeated.jsonl"
    path.write_text(json.dumps({"example_id": "e1", "reference": REPEATED_REFERENCE,
                                "QAs": REPEATED_QAS,
                                "system_outputs": {"s": "Maria opened a bakery."}}) + "\n")
    out = tmp_path / "auto.json"
    report = run_json(capsys, *OWN_AUTO, "--dataset", str(path), "--qa-model",
                      str(predicate_copier), "--max-new-tokens", "1", "--presence", "lexical",
                      "--predicates", "gold", "--out", str(out))
    written = json.loads(out.read_text())
    assert written["qas"] == {"e1": [["opened", ""], ["opened", ""], ["sold", ""]]}
    assert report["systems"] == {"s": pytest.approx(2 / 3, abs=1e-12)}


def test_auto_with_a_predicate_detector(tmp_path, predicate_copier, capsys):
    """A token-classification detector (a tiny local substitute whose predicate class wins
    for every word) supplies the predicates: each reference word is generated for, and the
    results name the detector."""
    from transformers import AutoTokenizer

    from trainers.models.tiny import build_tiny_token_classifier
    tokenizer = AutoTokenizer.from_pretrained(str(predicate_copier))
    detector = build_tiny_token_classifier(tokenizer, labels=("O", "PREDICATE"),
                                           save_dir=tmp_path / "detector", favour=1)
    path = tmp_path / "one.jsonl"
    path.write_text(json.dumps({"example_id": "e1", "reference": "Maria opened shops.",
                                "QAs": REPEATED_QAS,
                                "system_outputs": {"s": "Maria opened a bakery."}}) + "\n")
    out = tmp_path / "auto.json"
    report = run_json(capsys, *OWN_AUTO, "--dataset", str(path), "--qa-model",
                      str(predicate_copier), "--max-new-tokens", "1", "--presence", "lexical",
                      "--predicate-model", str(detector), "--out", str(out))
    from trainers.models.predicate_detector import PredicateDetector
    assert PredicateDetector(str(detector))("Maria opened shops.") == ["Maria", "opened",
                                                                       "shops"]
    written = json.loads(out.read_text())
    # the copier model answers only for the verbs it knows: "opened" of the three predicates
    assert written["qas"]["e1"] == [["opened", ""]]
    assert report["predicates"] == f"detector: {detector}"
