"""Encoder inputs of the RoBERTa baselines (trainers.encoders.inputs) on the USB fixture, with a
tiny RoBERTa-layout tokenizer trained on its text (docs/usb-baselines.md §3, §6)."""
from __future__ import annotations

import copy

import pytest

from tasks.metrics.spans import word_spans
from tasks.plumbing.errors import DataError
from tasks.plumbing.io import read_jsonl
from trainers.encoders.inputs import (
    IGNORED,
    ArticleInput,
    PairInput,
    evext_inputs,
    ext_inputs,
    fac_input,
    fac_inputs,
    unsup_input,
    unsup_inputs,
)

BOS, PAD, EOS, UNK, MASK = range(5)
SPLITS = ("train", "validation", "test")


def fixture_records(data_dir, task: str) -> list[dict]:
    """Every record of the task in the fixture's `all` variant (train, validation, test)."""
    return [record for split in SPLITS
            for record in read_jsonl(data_dir / "all" / task / f"{split}.jsonl")]


def bare_ids(tokenizer, text: str) -> list[int]:
    return tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"]


LONG_EVIDENCE = ["Port Alden acquired a new plant in Perth in 1892 after a long review."] * 60


# ---- the tokenizer ------------------------------------------------------------------------
def test_the_tiny_roberta_tokenizer_has_roberta_special_tokens_and_templates(roberta_tokenizer):
    tokenizer = roberta_tokenizer
    assert tokenizer.convert_ids_to_tokens([BOS, PAD, EOS, UNK, MASK]) == [
        "<s>", "<pad>", "</s>", "<unk>", "<mask>"]
    assert (tokenizer.bos_token_id, tokenizer.pad_token_id, tokenizer.sep_token_id,
            tokenizer.cls_token_id) == (BOS, PAD, EOS, BOS)
    first, second = bare_ids(tokenizer, "Mara Voss"), bare_ids(tokenizer, "was renamed.")
    assert tokenizer("Mara Voss")["input_ids"] == [BOS, *first, EOS]
    assert tokenizer("Mara Voss", "was renamed.")["input_ids"] == [
        BOS, *first, EOS, EOS, *second, EOS]
    # no prefix space (as roberta-large): the first word is not the word after a space
    assert tokenizer.convert_ids_to_tokens(first)[0] != tokenizer.convert_ids_to_tokens(
        bare_ids(tokenizer, " Mara"))[0]


def test_offsets_are_trimmed_to_the_words(roberta_tokenizer):
    text = "Mara Voss was renamed."
    encoded = roberta_tokenizer(text, return_offsets_mapping=True)
    pieces = [text[start:end] for start, end in encoded["offset_mapping"]]
    assert pieces[0] == pieces[-1] == ""  # <s> and </s>
    assert "".join(pieces) == "MaraVosswasrenamed."
    assert all(piece == piece.strip() for piece in pieces)


# ---- FAC ----------------------------------------------------------------------------------
def test_fac_pair_is_evidence_then_summary_with_the_record_label(roberta_tokenizer, data_dir):
    records = fixture_records(data_dir, "factuality_classification")
    inputs = fac_inputs(records, roberta_tokenizer)
    assert [item.label for item in inputs] == [record["label"] for record in records]
    assert sum(item.label for item in inputs) == len(records) // 2  # each edit twice: 0, 1
    record = records[0]
    evidence = bare_ids(roberta_tokenizer, " ".join(record["input_lines"]))
    summary = bare_ids(roberta_tokenizer, record["summary_sent"])
    assert inputs[0] == PairInput([BOS, *evidence, EOS, EOS, *summary, EOS], record["label"])


def test_fac_cuts_the_evidence_from_its_end_and_never_the_summary(roberta_tokenizer, data_dir):
    record = dict(fixture_records(data_dir, "factuality_classification")[1],
                  input_lines=LONG_EVIDENCE)
    evidence = bare_ids(roberta_tokenizer, " ".join(LONG_EVIDENCE))
    summary = bare_ids(roberta_tokenizer, record["summary_sent"])
    assert len(evidence) > 512
    for max_tokens in (512, len(summary) + 5, len(summary) + 40):
        ids = fac_input(record, roberta_tokenizer, max_tokens=max_tokens).input_ids
        kept = max_tokens - 4 - len(summary)
        assert ids == [BOS, *evidence[:kept], EOS, EOS, *summary, EOS]
        assert len(ids) == max_tokens


# ---- EVEXT --------------------------------------------------------------------------------
def test_evext_has_one_pair_per_summary_line_and_input_line(roberta_tokenizer, data_dir):
    records = fixture_records(data_dir, "evidence_extraction")
    pairs = evext_inputs(records, roberta_tokenizer)
    expected = sum(len(r["summary_lines"]) * len(r["input_lines"]) for r in records)
    assert len(pairs) == expected == 497
    assert sum(pair.label for pair in pairs) == sum(
        len(set(lines)) for r in records for lines in r["evidence_labels"])
    assert max(len(pair.input_ids) for pair in pairs) <= 128
    record = records[0]
    pair = pairs[len(record["input_lines"]) + 8]  # summary line 1, input line 8
    assert (pair.record_index, pair.summary_index, pair.line_index) == (0, 1, 8)
    assert pair.label == int(8 in record["evidence_labels"][1])
    assert pair.input_ids == [BOS, *bare_ids(roberta_tokenizer, record["input_lines"][8]), EOS,
                              EOS, *bare_ids(roberta_tokenizer, record["summary_lines"][1]), EOS]


def test_evext_cuts_the_longer_sentence_first(roberta_tokenizer, data_dir):
    record = dict(fixture_records(data_dir, "evidence_extraction")[0])
    record.update(input_lines=[" ".join(LONG_EVIDENCE[:3])], summary_lines=["Mara Voss moved."],
                  evidence_labels=[[0]])
    (pair,) = evext_inputs([record], roberta_tokenizer, max_tokens=24)
    summary = bare_ids(roberta_tokenizer, "Mara Voss moved.")
    line = bare_ids(roberta_tokenizer, record["input_lines"][0])
    assert pair.input_ids == [BOS, *line[:20 - len(summary)], EOS, EOS, *summary, EOS]
    assert pair.label == 1


# ---- EXT ----------------------------------------------------------------------------------
def test_ext_sentences_alone_within_the_limits(roberta_tokenizer, data_dir):
    records = fixture_records(data_dir, "extractive_summarization")
    articles = ext_inputs(records, roberta_tokenizer)
    assert [len(a.sentence_ids) for a in articles] == [len(r["input_lines"]) for r in records]
    assert all(a.dropped == 0 and len(a.sentence_ids) <= 128 and
               max(map(len, a.sentence_ids)) <= 128 for a in articles)
    assert [a.labels for a in articles] == [r["labels"] for r in records]
    first_line = records[0]["input_lines"][2]
    assert articles[0].sentence_ids[2] == [BOS, *bare_ids(roberta_tokenizer, first_line), EOS]


def test_ext_keeps_the_first_sentences_and_cuts_each_from_its_end(roberta_tokenizer, data_dir):
    record = fixture_records(data_dir, "extractive_summarization")[0]
    article = ext_inputs([record], roberta_tokenizer, max_sentences=5, max_sentence_tokens=10)[0]
    lines = record["input_lines"]
    assert article == ArticleInput(
        [[BOS, *bare_ids(roberta_tokenizer, line)[:8], EOS] for line in lines[:5]],
        record["labels"][:5], len(lines) - 5)
    assert article.dropped == 9 and max(map(len, article.sentence_ids)) == 10


# ---- UNSUP --------------------------------------------------------------------------------
HAND_RECORD = {"summary": "Alden was renamed in Quebec.", "input_lines": ["Alden moved."],
               "annotated_summary": "Alden was renamed[] in Quebec[/] ."}


def labelled_text(summary: str, item, label: int) -> str:
    """The summary characters of the tokens with `label`, from the words they start in."""
    words = word_spans(summary)
    return "".join(summary[slice(*words[word])]
                   for position, word in enumerate(item.token_words)
                   if word is not None and item.labels[position] == label
                   and item.token_words.index(word) == position)


def test_unsup_labels_the_tokens_of_the_marked_words(roberta_tokenizer):
    item = unsup_input(HAND_RECORD, roberta_tokenizer)
    summary, evidence = (bare_ids(roberta_tokenizer, text) for text in
                         (HAND_RECORD["summary"], "Alden moved."))
    assert item.input_ids == [BOS, *summary, EOS, EOS, *evidence, EOS]
    assert labelled_text(HAND_RECORD["summary"], item, 1) == "inQuebec"
    assert labelled_text(HAND_RECORD["summary"], item, 0) == "Aldenwasrenamed."
    masked = [0, len(summary) + 1, *range(len(summary) + 2, len(item.input_ids))]
    assert all(item.labels[position] == IGNORED for position in masked)
    assert all(item.token_words[position] is None for position in masked)


def test_unsup_labels_on_the_fixture(roberta_tokenizer, data_dir):
    records = fixture_records(data_dir, "unsupported_span_prediction")
    items = unsup_inputs(records, roberta_tokenizer)
    marked = [r for r, item in zip(records, items) if 1 in item.labels]
    assert len(marked) == sum("[]" in r["annotated_summary"] for r in records) == 13
    record = next(r for r in records if r["annotated_summary"].startswith("[] Known"))
    item = items[records.index(record)]
    assert labelled_text(record["summary"], item, 1).startswith("Knownlocallyasthe")
    assert labelled_text(record["summary"], item, 1).endswith("site,andavote")


def test_unsup_cuts_only_the_evidence(roberta_tokenizer):
    record = dict(HAND_RECORD, input_lines=LONG_EVIDENCE)
    summary = bare_ids(roberta_tokenizer, record["summary"])
    evidence = bare_ids(roberta_tokenizer, " ".join(LONG_EVIDENCE))
    for max_tokens in (512, len(summary) + 9):
        item = unsup_input(record, roberta_tokenizer, max_tokens=max_tokens)
        kept = max_tokens - 4 - len(summary)
        assert item.input_ids == [BOS, *summary, EOS, EOS, *evidence[:kept], EOS]
        assert len(item.labels) == len(item.token_words) == max_tokens


# ---- bad records --------------------------------------------------------------------------
FAC_OK = {"input_lines": ["Alden moved."], "summary_sent": "Alden was renamed.", "label": 1}
EVEXT_OK = {"input_lines": ["A.", "B."], "summary_lines": ["C."], "evidence_labels": [[1]]}
EXT_OK = {"input_lines": ["A.", "B."], "labels": [0, 1]}
LONG_SUMMARY = " ".join(["Alden was renamed in Quebec."] * 20)


def build_fac(records, tokenizer, path):
    return fac_inputs(records, tokenizer, max_tokens=64, path=path)


def build_evext(records, tokenizer, path):
    return evext_inputs(records, tokenizer, path=path)


def build_ext(records, tokenizer, path):
    return ext_inputs(records, tokenizer, path=path)


def build_unsup(records, tokenizer, path):
    return unsup_inputs(records, tokenizer, max_tokens=64, path=path)


BAD_RECORDS = [
    (build_fac, dict(FAC_OK, summary_sent=LONG_SUMMARY), "summary_sent",
     "the summary needs"),
    (build_fac, dict(FAC_OK, label=2), "label", "expected a label 0 or 1, got 2"),
    (build_fac, {"input_lines": ["A."], "label": 0}, "summary_sent", "missing field"),
    (build_evext, dict(EVEXT_OK, evidence_labels=[[1], [0]]), "evidence_labels",
     "2 evidence lists for 1 summary lines"),
    (build_evext, dict(EVEXT_OK, evidence_labels=[[2]]), "evidence_labels",
     "expected lists of line indices in 0..1, got [2]"),
    (build_ext, dict(EXT_OK, labels=[0]), "labels", "1 labels for 2 input lines"),
    (build_ext, dict(EXT_OK, input_lines="A. B."), "input_lines", "expected list, got str"),
    (build_unsup, dict(HAND_RECORD, annotated_summary="Alden was[] moved[/] ."),
     "annotated_summary", "is not its summary with [] [/] marks added"),
    (build_unsup, dict(HAND_RECORD, summary=LONG_SUMMARY,
                       annotated_summary=LONG_SUMMARY), "summary", "the summary needs"),
]


@pytest.mark.parametrize("build, bad, field, reason", BAD_RECORDS)
def test_bad_records_name_file_line_and_field(roberta_tokenizer, build, bad, field, reason):
    good = {build_fac: FAC_OK, build_evext: EVEXT_OK, build_ext: EXT_OK,
            build_unsup: HAND_RECORD}[build]
    with pytest.raises(DataError) as located:
        build([good, good, bad], roberta_tokenizer, "unsup.jsonl")
    message = str(located.value)
    assert message.startswith(f"unsup.jsonl:3, field '{field}': {reason}")
    assert "\n" not in message
    with pytest.raises(DataError) as indexed:
        build([good, bad], roberta_tokenizer, None)
    assert str(indexed.value).startswith(f"field '{field}': record 1: {reason}")


def test_a_tokenizer_the_heads_cannot_read_is_refused(roberta_tokenizer, usb_tokenizer):
    from tasks.plumbing.errors import SumbenchError
    from trainers.encoders.inputs import check_encoder_tokenizer

    check_encoder_tokenizer(roberta_tokenizer)  # RoBERTa's layout: accepted
    # the T5-style tokenizer of the seq2seq tests: "</s>", no "<s>"
    with pytest.raises(SumbenchError, match="^model/x has no <s> token: the encoder profiles "
                                            "need RoBERTa's tokenizer"):
        check_encoder_tokenizer(usb_tokenizer, "model/x")
    # RoBERTa's tokens without RoBERTa's pair template (the pair framed as T5 frames it)
    from tokenizers import processors

    reframed = copy.deepcopy(roberta_tokenizer)
    end = reframed.convert_tokens_to_ids("</s>")
    reframed.backend_tokenizer.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", pair="<s> $A </s> $B </s>",
        special_tokens=[("<s>", reframed.convert_tokens_to_ids("<s>")), ("</s>", end)])
    with pytest.raises(SumbenchError, match="^model/y does not frame texts as RoBERTa does"):
        check_encoder_tokenizer(reframed, "model/y")
