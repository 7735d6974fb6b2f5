"""Encoder inputs of the RoBERTa-Large baselines (docs/usb-baselines.md §3): USB task records
and a RoBERTa-style tokenizer in, token ids and gold labels out (plain lists, no torch).

- FAC: `<s> evidence </s></s> summary </s>`, the evidence cut from its end (`only_first`),
  label = the record's label (1 = unsupported).
- EVEXT: one pair `<s> source line j </s></s> summary line i </s>` per (i, j), cut
  longest-first; label 1 iff j is in `evidence_labels[i]`.
- EXT: per article, each sentence alone as `<s> sentence </s>` cut from its end, the first
  `max_sentences` sentences kept.
- UNSUP: `<s> summary </s></s> evidence </s>`, the evidence cut from its end (`only_second`);
  a summary token is labelled 1 iff the Treebank word holding its first character is tagged
  B or I by the official scorer's word tags (tasks.metrics.spans.bio_tags); special and
  evidence tokens are masked with `IGNORED`.

Inputs to predict (`gold=False`: records without their gold fields, as a board's public inputs
are) read no label: every label is `IGNORED`.

Bad records raise a one-line DataError naming the file, line and field when `path` is given
(line = record index + 1, as read from a JSONL file), else the record's index.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tasks.metrics.spans import CLOSE_MARK, OPEN_MARK, bio_tags, word_spans
from tasks.plumbing.errors import DataError, SumbenchError

#: the label of a token no loss is computed on (torch's cross-entropy `ignore_index`)
IGNORED = -100
#: Table 10's input limits
FAC_MAX_TOKENS = UNSUP_MAX_TOKENS = 512
EVEXT_MAX_TOKENS = EXT_MAX_SENTENCE_TOKENS = EXT_MAX_SENTENCES = 128


@dataclass(frozen=True)
class PairInput:
    """One `<s> A </s></s> B </s>` input for a head on `<s>` and its label (FAC)."""
    input_ids: list[int]
    label: int


@dataclass(frozen=True)
class EvidencePairInput(PairInput):
    """One EVEXT pair and where it belongs: record `record_index`, summary line
    `summary_index`, input line `line_index`."""
    record_index: int
    summary_index: int
    line_index: int


@dataclass(frozen=True)
class ArticleInput:
    """One EXT article (or window of one): `<s> sentence </s>` ids per kept sentence, their
    labels, how many sentences past `max_sentences` were dropped, and the record it is of."""
    sentence_ids: list[list[int]]
    labels: list[int]
    dropped: int
    record_index: int = 0


@dataclass(frozen=True)
class TokenInput:
    """One UNSUP input: ids, a label per token (`IGNORED` for special and evidence tokens),
    and per token the index of the summary word (`word_spans`) holding its first character
    (None for special and evidence tokens)."""
    input_ids: list[int]
    labels: list[int]
    token_words: list[int | None]


# ---- errors -----------------------------------------------------------------------------
def record_error(message: str, index: int, field: str | None,
                 path: str | None = None) -> DataError:
    """A DataError at `path`, line index + 1 (records read in file order), else naming the
    record's index."""
    if path is not None:
        return DataError(message, path=path, line=index + 1, field=field)
    return DataError(f"record {index}: {message}", field=field)


def _field(record: Any, field: str, kind: type, index: int, path: str | None) -> Any:
    if not isinstance(record, dict) or field not in record:
        raise record_error("missing field", index, field, path)
    value = record[field]
    if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
        raise record_error(f"expected {kind.__name__}, got {type(value).__name__}", index,
                           field, path)
    return value


def _lines(record: Any, field: str, index: int, path: str | None) -> list[str]:
    lines = _field(record, field, list, index, path)
    if not all(isinstance(line, str) for line in lines):
        raise record_error("expected a list of strings", index, field, path)
    return lines


def _binary(value: Any, index: int, field: str, path: str | None) -> int:
    if isinstance(value, bool) or value not in (0, 1):
        raise record_error(f"expected a label 0 or 1, got {value!r}", index, field, path)
    return int(value)


def joined_evidence(lines: Sequence[str]) -> str:
    """Evidence lines joined by one space, as every format of the release joins them."""
    return " ".join(lines)


def check_encoder_tokenizer(tokenizer, where: str = "the tokenizer") -> None:
    """A tokenizer the encoder heads can read: RoBERTa's `<s>` and `</s>`, and its templates
    `<s> A </s>` and `<s> A </s></s> B </s>` (the heads read `<s>`; pairs are cut by half).
    Anything else is a one-line SumbenchError naming `where`."""
    start, end = (tokenizer.convert_tokens_to_ids(token) for token in ("<s>", "</s>"))
    unknown = getattr(tokenizer, "unk_token_id", None)
    missing = [token for token, found in (("<s>", start), ("</s>", end))
               if found is None or found == unknown]
    if missing:
        raise SumbenchError(f"{where} has no {' or '.join(missing)} token: the encoder "
                            f"profiles need RoBERTa's tokenizer (<s> A </s></s> B </s>)")
    single = tokenizer("a")["input_ids"]
    pair = tokenizer("a", "b")["input_ids"]
    if single[0] != start or single[-1] != end or pair[0] != start or pair[-1] != end or \
            pair.count(end) != 3:
        raise SumbenchError(f"{where} does not frame texts as RoBERTa does (<s> A </s> and "
                            f"<s> A </s></s> B </s>): give RoBERTa's tokenizer")


# ---- pairs whose second (FAC) or first (UNSUP) half is never cut -------------------------
def _token_count(tokenizer, text: str) -> int:
    return len(tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"])


def _check_fits(tokenizer, kept: str, cut: str, max_tokens: int, where: tuple) -> None:
    """The text that is never cut, with the pair's special tokens and at least one token of
    the text that is cut (when it has any), must fit in `max_tokens`."""
    needed = (_token_count(tokenizer, kept) + tokenizer.num_special_tokens_to_add(pair=True)
              + min(1, _token_count(tokenizer, cut)))
    if needed > max_tokens:
        raise record_error(f"the summary needs {needed} of {max_tokens} tokens with the "
                           f"special tokens (it is never truncated)", *where)


def fac_input(record: dict, tokenizer, max_tokens: int = FAC_MAX_TOKENS, index: int = 0,
              path: str | None = None, gold: bool = True) -> PairInput:
    """(evidence, summary_sent), the evidence cut from its end; label 1 = unsupported."""
    evidence = joined_evidence(_lines(record, "input_lines", index, path))
    summary = _field(record, "summary_sent", str, index, path)
    label = _binary(_field(record, "label", int, index, path), index, "label", path) \
        if gold else IGNORED
    _check_fits(tokenizer, summary, evidence, max_tokens, (index, "summary_sent", path))
    encoded = tokenizer(evidence, summary, truncation="only_first", max_length=max_tokens)
    return PairInput(list(encoded["input_ids"]), label)


def fac_inputs(records: Sequence[dict], tokenizer, max_tokens: int = FAC_MAX_TOKENS,
               path: str | None = None, gold: bool = True) -> list[PairInput]:
    return [fac_input(record, tokenizer, max_tokens, index, path, gold)
            for index, record in enumerate(records)]


# ---- EVEXT: every (summary line, source line) pair -----------------------------------------
def _evidence_sets(record: dict, n_summary: int, n_lines: int, index: int,
                   path: str | None) -> list[set[int]]:
    evidence = _field(record, "evidence_labels", list, index, path)
    if len(evidence) != n_summary:
        raise record_error(f"{len(evidence)} evidence lists for {n_summary} summary lines",
                           index, "evidence_labels", path)
    for indices in evidence:
        if not isinstance(indices, list) or not all(
                isinstance(j, int) and not isinstance(j, bool) and 0 <= j < n_lines
                for j in indices):
            raise record_error(f"expected lists of line indices in 0..{n_lines - 1}, got "
                               f"{indices!r}", index, "evidence_labels", path)
    return [set(indices) for indices in evidence]


def evext_inputs(records: Sequence[dict], tokenizer, max_tokens: int = EVEXT_MAX_TOKENS,
                 path: str | None = None, gold: bool = True) -> list[EvidencePairInput]:
    """One pair (source line j, summary line i) per record, i and j (in that order), cut
    longest-first to `max_tokens`; label 1 iff j is in `evidence_labels[i]`."""
    pairs = []
    for index, record in enumerate(records):
        lines = _lines(record, "input_lines", index, path)
        summary_lines = _lines(record, "summary_lines", index, path)
        evidence = _evidence_sets(record, len(summary_lines), len(lines), index, path) \
            if gold else None
        if not lines:
            continue
        for i, summary_line in enumerate(summary_lines):
            encoded = tokenizer(lines, [summary_line] * len(lines), truncation="longest_first",
                                max_length=max_tokens)
            pairs.extend(EvidencePairInput(list(ids), IGNORED if evidence is None else
                                           int(j in evidence[i]), index, i, j)
                         for j, ids in enumerate(encoded["input_ids"]))
    return pairs


# ---- EXT: sentences of an article for the hierarchical tagger -----------------------------
def ext_input(record: dict, tokenizer, max_sentences: int = EXT_MAX_SENTENCES,
              max_sentence_tokens: int = EXT_MAX_SENTENCE_TOKENS, index: int = 0,
              path: str | None = None, gold: bool = True) -> ArticleInput:
    """The first `max_sentences` lines, each `<s> line </s>` cut from its end to
    `max_sentence_tokens`, with their labels."""
    lines = _lines(record, "input_lines", index, path)
    labels = [_binary(label, index, "labels", path)
              for label in _field(record, "labels", list, index, path)] if gold else \
        [IGNORED] * len(lines)
    if len(labels) != len(lines):
        raise record_error(f"{len(labels)} labels for {len(lines)} input lines", index,
                           "labels", path)
    kept = lines[:max_sentences]
    ids = tokenizer(kept, truncation=True, max_length=max_sentence_tokens)["input_ids"] \
        if kept else []
    return ArticleInput([list(sentence) for sentence in ids], labels[:len(kept)],
                        len(lines) - len(kept), index)


def ext_windows(record: dict, tokenizer, max_sentences: int = EXT_MAX_SENTENCES,
                max_sentence_tokens: int = EXT_MAX_SENTENCE_TOKENS, index: int = 0,
                path: str | None = None, gold: bool = True) -> list[ArticleInput]:
    """The article in windows of `max_sentences` consecutive lines (the last may be shorter;
    an article without lines is one empty window): every line kept, each window an article
    of its own to the hierarchical tagger (usb-baselines §3.3's alternative)."""
    whole = ext_input(record, tokenizer, len(record.get("input_lines") or []) or 1,
                      max_sentence_tokens, index, path, gold)
    starts = range(0, max(1, len(whole.sentence_ids)), max_sentences)
    return [ArticleInput(whole.sentence_ids[start:start + max_sentences],
                         whole.labels[start:start + max_sentences], 0, index)
            for start in starts]


def ext_inputs(records: Sequence[dict], tokenizer, max_sentences: int = EXT_MAX_SENTENCES,
               max_sentence_tokens: int = EXT_MAX_SENTENCE_TOKENS,
               path: str | None = None, long_articles: str = "truncate", gold: bool = True
               ) -> list[ArticleInput]:
    """Each record's article, its first `max_sentences` lines (`long_articles="truncate"`,
    one input per record) or all of them in windows (`"windows"`: `ext_windows`)."""
    if long_articles == "windows":
        return [window for index, record in enumerate(records)
                for window in ext_windows(record, tokenizer, max_sentences,
                                          max_sentence_tokens, index, path, gold)]
    return [ext_input(record, tokenizer, max_sentences, max_sentence_tokens, index, path, gold)
            for index, record in enumerate(records)]


# ---- UNSUP: a label per summary token -----------------------------------------------------
def _bare(text: str) -> str:
    """Text without span marks, whitespace and the Treebank quote forms the derivation's
    re-spaced tokens may use (`` and '' for a double quote)."""
    for mark in (OPEN_MARK, CLOSE_MARK):
        text = text.replace(mark, "")
    text = text.replace("``", '"').replace("''", '"')
    return "".join(text.split())


def gold_word_tags(summary: str, annotated: str, index: int = 0,
                   path: str | None = None) -> list[str]:
    """The official scorer's word tags of (summary, annotated_summary); the annotated
    summary must be the summary with marks (up to the derivation's re-spacing)."""
    if _bare(annotated) != _bare(summary):
        raise record_error("is not its summary with [] [/] marks added", index,
                           "annotated_summary", path)
    return bio_tags(summary, annotated)


def token_words(offsets: Sequence[tuple[int, int]], in_summary: Sequence[bool],
                summary: str, words: Sequence[tuple[int, int]]) -> list[int | None]:
    """Per token, the index of the word (`words`: summary offsets) holding its first
    character, spaces skipped; None for tokens outside the summary or holding no word
    character."""
    found: list[int | None] = []
    for (start, end), inside in zip(offsets, in_summary):
        while inside and start < end and summary[start].isspace():
            start += 1
        found.append(next((w for w, (word_start, word_end) in enumerate(words)
                           if word_start <= start < word_end), None)
                     if inside and start < end else None)
    return found


def unsup_input(record: dict, tokenizer, max_tokens: int = UNSUP_MAX_TOKENS, index: int = 0,
                path: str | None = None, gold: bool = True) -> TokenInput:
    """(summary, evidence), the evidence cut from its end; summary tokens labelled by the
    gold word tags, every other token `IGNORED`."""
    summary = _field(record, "summary", str, index, path)
    evidence = joined_evidence(_lines(record, "input_lines", index, path))
    tags = gold_word_tags(summary, _field(record, "annotated_summary", str, index, path),
                          index, path) if gold else None
    _check_fits(tokenizer, summary, evidence, max_tokens, (index, "summary", path))
    encoded = tokenizer(summary, evidence, truncation="only_second", max_length=max_tokens,
                        return_offsets_mapping=True)
    in_summary = [sequence == 0 for sequence in encoded.sequence_ids()]
    words = token_words(encoded["offset_mapping"], in_summary, summary, word_spans(summary))
    labels = [IGNORED if word is None or tags is None else int(tags[word] != "O")
              for word in words]
    return TokenInput(list(encoded["input_ids"]), labels, words)


def unsup_inputs(records: Sequence[dict], tokenizer, max_tokens: int = UNSUP_MAX_TOKENS,
                 path: str | None = None, gold: bool = True) -> list[TokenInput]:
    return [unsup_input(record, tokenizer, max_tokens, index, path, gold)
            for index, record in enumerate(records)]
