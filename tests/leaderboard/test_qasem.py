"""AutoQAPyramid's QASem QA generation, by the official rules (plroit/qasem_parser
qasem_parser/argument_detection.py `T2TQasemArgumentParser` and common_defs.py; ZhangShiyue/
QAPyramid run_autoqapyramid.py `run_qa_gen`, `parse_qasem`), each expected value worked by
those rules; and `sumbench qapyramid auto` end to end with a tiny T5 wired to answer in the
parser's output format."""
from __future__ import annotations

import json

import pytest

from benchmark.cli import main
from leaderboard.evaluators.qapyramid.qasem import (
    RecordedPredicates,
    answer_spans,
    clean_question,
    frame_arguments,
    frame_qas,
    locate_answer,
    prompt,
    role_labels,
)
from tasks.plumbing.errors import DataError

FOX = ["The", "fox", "jumped", "over", "the", "fence", "."]


def test_the_prompt_marks_the_predicate_without_spaces():
    # argument_detection.py `_prepare_prompt`: prefix tokens, the predicate between
    # <extra_id_0> and <extra_id_1> with no space, all joined by single spaces
    assert prompt(FOX, 2) == ("Generate QA pairs: The fox <extra_id_0>jumped<extra_id_1> over "
                              "the fence .")
    assert prompt(FOX, 0) == "Generate QA pairs: <extra_id_0>The<extra_id_1> fox jumped over " \
                             "the fence ."


@pytest.mark.parametrize("tokens, answer, spans", [
    # spaces between tokens may be missing in the answer (`find_answer_from_token`)
    (["On", "Friday", ",", "Clark", "posted"], "On Friday, Clark posted", [(0, 5)]),
    # every non-overlapping occurrence
    (["the", "fox", "saw", "the", "fox"], "the fox", [(0, 2), (3, 5)]),
    # a partial token never matches; nor an empty answer
    (["foxes", "ran"], "fox", []),
    (["fox"], "", []),
])
def test_answers_are_found_as_token_spans(tokens, answer, spans):
    assert answer_spans(tokens, answer) == spans


def test_the_occurrence_closest_to_the_predicate_wins():
    tokens = ["the", "fox", ",", "a", "dog", ",", "saw", "the", "fox"]
    assert locate_answer(tokens, "the fox", 6) == (7, 9)     # 1 token away, not 4
    assert locate_answer(tokens, "The Fox", 6) == (7, 9)     # case-insensitive fallback
    assert locate_answer(["a", "b", "a"], "a", 1) == (0, 1)  # a tie: the first
    assert locate_answer(tokens, "a cat", 6) is None


@pytest.mark.parametrize("raw, question", [
    ("What was _ taken _ _ _?", "What was taken?"),          # slots and the lone "?" go
    ("Who _ _ jumped _ _ _ ?", "Who jumped?"),
    ("where did someone jump?", "where did someone jump?"),
])
def test_questions_are_cleaned_as_qasem_parser_does(raw, question):
    assert clean_question(raw) == question


def test_decoded_output_becomes_printed_arguments():
    decoded = ("<pad> Who _ _ jumped _ _ _ ?The fox<extra_id_3>a cat<extra_id_2>where did "
               "someone jump ?over the fence<extra_id_2>no question mark here</s><pad>")
    arguments = frame_arguments(decoded, FOX, 2, "<pad>", "</s>", lambda q: "R0")
    # "a cat" is not in the sentence: dropped; the pair without "?" is skipped
    assert arguments == ["The fox (R0: Who jumped?)",
                         "over the fence (R0: where did someone jump?)"]
    assert frame_arguments(decoded, FOX, 2, "<pad>", "</s>", lambda q: None)[0] == \
        "The fox (Who jumped?)"


def test_frames_are_read_back_as_qapyramid_reads_them():
    frame = "jump-v:  The fox (R0: Who jumped?) | over the fence (where: where did someone jump?)"
    assert frame_qas(frame) == [("Who jumped?", "The fox"),
                                ("where did someone jump?", "over the fence")]
    # an answer holding "(" is cut there (answer = text before the first "("); with a role
    # the question survives, without one the bracketed text is taken for the question
    assert frame_qas("probe-v:  the FBI ( agency ) (R0: Who probed?)") == [
        ("Who probed?", "the FBI")]
    assert frame_qas("probe-v:  the FBI ( agency ) (Who probed?)") == [("agency", "the FBI")]


def _jsonl(path, records) -> str:
    path.write_text("".join(json.dumps(record) + "\n" for record in records))
    return str(path)


@pytest.mark.parametrize("record, field", [
    ({"sentence": "s", "tokens": "The fox", "predicates": []}, "tokens"),
    ({"sentence": "s", "tokens": ["fox"], "predicates": [{"index": 1, "lemma": "x",
                                                           "pos": "VERB"}]}, "predicates"),
    ({"sentence": "s", "tokens": ["fox"], "predicates": [{"index": 0, "lemma": "x"}]},
     "predicates"),
    ({"sentence": "s", "tokens": ["fox"]}, "predicates"),
])
def test_bad_recorded_predicates_name_line_and_field(tmp_path, record, field):
    path = _jsonl(tmp_path / "predicates.jsonl", [{"sentence": "ok", "tokens": [],
                                                    "predicates": []}, record])
    with pytest.raises(DataError) as error:
        RecordedPredicates(path)
    assert f"predicates.jsonl:2, field '{field}': " in str(error.value)


# ---- end to end ---------------------------------------------------------------------------
#: what the wired model answers for any prompt: one question, two answers
ANSWER = " Who jumped?The fox<extra_id_3>a cat"
REFERENCE = "The fox jumped over the fence. The fox slept."
PARSES = [
    {"sentence": "The fox jumped over the fence.", "tokens": FOX,
     "predicates": [{"index": 2, "lemma": "jump", "pos": "VERB"},
                    {"index": 5, "lemma": "fence", "pos": "NOUN"}]},
    {"sentence": "The fox slept.", "tokens": ["The", "fox", "slept", "."],
     "predicates": [{"index": 2, "lemma": "sleep", "pos": "VERB"}]},
]


@pytest.fixture(scope="module")
def qasem_parrot(tmp_path_factory):
    """A tiny T5 whose beam search writes ANSWER whatever it reads. Every block adds nothing
    (zero output projections) but the decoder's first feed-forward layer; token k of the
    answer (and the decoder's start) has an input dimension k and an output dimension 32 + k
    in its (tied) embedding, and that layer maps input dimension k to output dimension
    32 + k + 1: the next token's."""
    import torch

    from trainers.models.tiny import build_tiny_t5, build_tiny_tokenizer

    tokenizer = build_tiny_tokenizer([ANSWER, REFERENCE] * 50, vocab_size=400)
    tokenizer.add_special_tokens({"additional_special_tokens": [
        f"<extra_id_{k}>" for k in range(4)]})
    chain = [tokenizer.pad_token_id, *tokenizer(ANSWER)["input_ids"]]  # ends with </s>
    assert len(set(chain)) == len(chain) <= 32
    model = build_tiny_t5(tokenizer, seed=0)
    with torch.no_grad():
        for block in [*model.encoder.block, *model.decoder.block]:
            for name, weight in block.named_parameters():
                if name.endswith(("o.weight", "wo.weight")):
                    weight.zero_()
        model.shared.weight.zero_()
        feed_forward = model.decoder.block[0].layer[2].DenseReluDense
        for weight in (feed_forward.wi_0.weight, feed_forward.wi_1.weight):
            weight.zero_()
        for k, token in enumerate(chain):
            model.shared.weight[token, k] = model.shared.weight[token, 32 + k] = 10.0
            feed_forward.wi_0.weight[k, k] = feed_forward.wi_1.weight[k, k] = 1.0
            if k + 1 < len(chain):
                feed_forward.wo.weight[32 + k + 1, k] = 10.0
    folder = tmp_path_factory.mktemp("qasem-parrot")
    model.save_pretrained(str(folder))
    tokenizer.save_pretrained(str(folder))
    return folder


def test_qapyramid_auto_runs_the_qasem_parser(tmp_path, qasem_parrot, capsys):
    dataset = tmp_path / "dataset.jsonl"
    dataset.write_text(json.dumps({"example_id": "e1", "reference": REFERENCE,
                                   "QAs": ["Who jumped? The fox"],
                                   "system_outputs": {"s": "The fox jumped."}}) + "\n")
    out = tmp_path / "auto.json"
    assert main(["qapyramid", "auto", "--dataset", str(dataset), "--qa-model",
                 str(qasem_parrot), "--qasem-predicates",
                 _jsonl(tmp_path / "parses.jsonl", PARSES), "--presence", "lexical",
                 "--out", str(out)]) == 0
    written = json.loads(out.read_text())
    # per predicate: "The fox" is located (the copy nearest the predicate), "a cat" is not;
    # sentence 1 has two predicates, sentence 2 one, in that order
    assert written["qas"] == {"e1": [["Who jumped?", "The fox"]] * 3}
    assert written["config"]["qa_generator"] == "qasem"
    assert (written["config"]["qa_batch_size"], written["config"]["qasem_dtype"]) == \
        (32, "float32")  # the official run's settings, by default
    assert written["config"]["qasem_role_labels"] == role_labels()
    assert written["predicates"] == f"qasem predicates: {tmp_path / 'parses.jsonl'}"
    assert written["systems"] == {"s": 1.0}


@pytest.mark.parametrize("extra, message", [
    ([], "--qa-generator qasem needs --qasem-predicates FILE"),
    (["--predicates", "gold"], "--predicate-model and --predicates are for --qa-generator "
                               "sumbench"),
    (["--qa-generator", "sumbench", "--qasem-predicates", "p.jsonl"],
     "--qasem-predicates is for --qa-generator qasem"),
])
def test_generator_options_that_do_not_fit_are_refused(tmp_path, capsys, extra, message):
    assert main(["qapyramid", "auto", "--dataset", str(tmp_path / "d.jsonl"), "--qa-model",
                 "m", "--presence", "lexical", *extra]) == 2
    assert message in capsys.readouterr().err


def test_a_sentence_without_recorded_predicates_is_named(tmp_path, qasem_parrot, capsys):
    dataset = tmp_path / "dataset.jsonl"
    dataset.write_text(json.dumps({"example_id": "e1", "reference": "A new sentence.",
                                   "QAs": [], "system_outputs": {"s": "x"}}) + "\n")
    assert main(["qapyramid", "auto", "--dataset", str(dataset), "--qa-model",
                 str(qasem_parrot), "--qasem-predicates",
                 _jsonl(tmp_path / "parses.jsonl", PARSES), "--presence", "lexical"]) == 2
    assert "has no tokens and predicates for the sentence 'A new sentence.'" in \
        capsys.readouterr().err


def test_the_official_run_time_settings_are_the_defaults(qasem_parrot):
    """fp32 whatever the checkpoint's dtype, batches of 32, the tokenizer's own clean-up."""
    import torch
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    from leaderboard.evaluators.qapyramid.qasem import BATCH_SIZE, as_official_dtype, decoded

    assert BATCH_SIZE == 32
    model = AutoModelForSeq2SeqLM.from_pretrained(str(qasem_parrot)).to(torch.bfloat16)
    assert as_official_dtype(model).dtype == torch.float32
    tokenizer = AutoTokenizer.from_pretrained(str(qasem_parrot))
    ids = [tokenizer("The fox jumped ?", add_special_tokens=False)["input_ids"]]
    tokenizer.clean_up_tokenization_spaces = True
    assert [text.strip() for text in decoded(tokenizer, ids)] == ["The fox jumped?"]
    tokenizer.clean_up_tokenization_spaces = False
    assert [text.strip() for text in decoded(tokenizer, ids)] == ["The fox jumped ?"]


def test_role_labels_come_from_qanom_and_the_fallback_is_stated(monkeypatch):
    import builtins

    from leaderboard.evaluators.qapyramid import qasem

    pytest.importorskip("qanom", reason="sumbench[qasem] is not installed")
    assert qasem.role_labels().startswith("qanom ")
    assert qasem.default_role()("what did someone found _ _ _ ?") == "R1"
    real_import = builtins.__import__

    def without_qanom(name, *args, **kwargs):
        if name.startswith("qanom"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", without_qanom)
    assert qasem.role_labels().startswith("'R' for every role: qanom is not installed")
    assert qasem.default_role()("what did someone found _ _ _ ?") == "R"
