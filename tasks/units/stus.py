"""Lite³Pyramid's STU extraction: semantic triplet units from semantic-role frames, with
coreference resolved first, by the rules of the official `metric/extract_stus.py`
(ZhangShiyue/Lite2-3Pyramid). The models are inputs, not part of the rules:

- a frame source: sentence -> {"words": [...], "verbs": [{"tags": [BIO tags]}, ...]}
  (the shape of AllenNLP's SRL predictor's output);
- optionally a coreference source: document -> {"document": [words], "clusters":
  [[[start, end], ...], ...]} (inclusive word spans, AllenNLP's coreference output).

`RecordedFrames` / `RecordedCoref` read such outputs recorded in JSONL files, so STUs can be
extracted wherever the frames were made. The rules (official line numbers in brackets):

Coreference (`_get_and_replace_coref`): the reference without `<t>`/`</t>` marks. In each
cluster, mentions whose lower-cased text is one of `PRONOUNS` are pronouns, the others
names; the first name replaces every later mention (names and pronouns) in the words. Each
later name that differs from the first (case-insensitively), was not seen before, does not
contain the first, and shares under half of its space-separated words with it adds the STU
"<first> is <name>". A cluster without names changes nothing.

Frames (`_get_srl_list`), per verb of a sentence: tagged words before the verb's V tag form
the subject; V-tagged words the verb (the word before the V word is remembered); after the
verb, a tagged word joins the last argument when it has the same label, else opens one (B-
and I- are not read: two spans of one label in a row are one argument). A verb is skipped
without subject words, after "to", or when it is a modal or a lone "'"; after a form of "be"
(am, are, is, was, were, been) that word joins the verb; a first argument ARGM-NEG joins the
verb too. Each argument gives "<subject> <verb> <argument>", each text once per sentence. A
sentence without any gives its own words. Sentences are NLTK's (`nltk.sent_tokenize`), each
stripped, empty ones skipped; the coreference STUs follow the frame STUs.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from tasks.plumbing.errors import DataError, SumbenchError
from tasks.plumbing.io import iter_jsonl

PRONOUNS = frozenset(("it", "he", "she", "they", "this", "i", "you", "her", "him", "their",
                      "them", "his", "its", "my", "your"))
BE_FORMS = frozenset(("am", "are", "is", "was", "were", "been"))
SKIPPED_VERBS = frozenset(("'", "will", "could", "can", "might", "should", "would"))

Frame = Mapping[str, Any]
FrameSource = Callable[[str], Frame]
CorefSource = Callable[[str], Mapping[str, Any]]


def _split_frame(words: Sequence[str], tags: Sequence[str]):
    """(subject words, verb words, the word before the last verb word, [[label, words]])."""
    subject, verb, arguments = [], [], []
    before_verb, previous, after_verb = None, None, False
    for word, tag in zip(words, tags):
        if tag != "O":
            label = tag.split("-", 1)[1]
            if label == "V":
                after_verb = True
                verb.append(word)
                before_verb = previous
            elif after_verb:
                if not arguments or arguments[-1][0] != label:
                    arguments.append([label, []])
                arguments[-1][1].append(word)
            else:
                subject.append(word)
        previous = word
    return subject, verb, before_verb, arguments


def verb_units(words: Sequence[str], tags: Sequence[str]) -> list[str]:
    """The STUs of one verb's frame (may be none)."""
    subject, verb, before_verb, arguments = _split_frame(words, tags)
    if not subject or not verb or before_verb == "to":
        return []
    if before_verb in BE_FORMS:
        verb = [before_verb, *verb]
    verb_text = " ".join(verb)
    if verb_text in SKIPPED_VERBS:
        return []
    if arguments and arguments[0][0] == "ARGM-NEG":
        verb_text = f"{verb_text} {' '.join(arguments[0][1])}"
        arguments = arguments[1:]
    subject_text = " ".join(subject)
    return [f"{subject_text} {verb_text} {' '.join(argument)}" for _, argument in arguments]


def sentence_units(frame: Frame) -> list[str]:
    """The STUs of one sentence's frames, each once; the sentence's words when none."""
    words = list(frame["words"])
    units: list[str] = []
    for verb in frame["verbs"]:
        for unit in verb_units(words, verb["tags"]):
            if unit not in units:
                units.append(unit)
    return units or [" ".join(words)]


def replace_coreferences(words: Sequence[str], clusters: Sequence[Sequence[Sequence[int]]]
                         ) -> tuple[str, list[str]]:
    """(the text with later mentions replaced by each cluster's first name, the "A is B"
    units)."""
    replaced: dict[int, tuple[int, str]] = {}
    units: list[str] = []
    for cluster in clusters:
        pronouns, names = [], []
        for start, end in cluster:
            span = " ".join(words[start:end + 1]).strip()
            (pronouns if span.lower() in PRONOUNS else names).append((start, end, span))
        if not names:
            continue
        first = names[0][2]
        seen: set[str] = set()
        for start, end, name in names[1:]:
            if _is_new_name(name, first, seen):
                units.append(f"{first} is {name}")
                seen.add(name.lower())
            replaced[start] = (end, first)
        for start, end, _ in pronouns:
            replaced[start] = (end, first)
    out, index = [], 0
    while index < len(words):
        if index in replaced:
            out.append(replaced[index][1])
            index = replaced[index][0] + 1
        else:
            out.append(words[index])
            index += 1
    return " ".join(out), units


def _is_new_name(name: str, first: str, seen: set[str]) -> bool:
    lower, first_lower = name.lower(), first.lower()
    name_words, first_words = set(lower.split(" ")), set(first_lower.split(" "))
    return (lower != first_lower and lower not in seen and first_lower not in lower
            and len(name_words & first_words) / len(name_words) < 0.5)


@dataclass(frozen=True)
class ReferenceSentences:
    """One reference after coreference replacement: its sentences' frames and its
    coreference STUs."""
    frames: list[Frame]
    coref_units: list[str]

    def stus(self) -> list[str]:
        """Its STUs: each sentence's frame STUs, then the coreference STUs."""
        return [unit for frame in self.frames for unit in sentence_units(frame)] + \
            self.coref_units

    @cached_property
    def sentence_words(self) -> list[set[str]]:
        """Each sentence's distinct words, lower-cased."""
        return [{word.lower() for word in frame["words"]} for frame in self.frames]

    @property
    def texts(self) -> list[str]:
        """Each sentence as its words joined by spaces."""
        return [" ".join(frame["words"]) for frame in self.frames]


def reference_sentences(reference: str, frames: FrameSource,
                        coref: CorefSource | None = None) -> ReferenceSentences:
    """One reference's sentences (NLTK's, each stripped, empty ones skipped) and frames."""
    import nltk  # its English Punkt model: installed with the `tasks` package

    coref_units: list[str] = []
    if coref is not None:
        resolved = coref(reference.replace("<t>", " ").replace("</t>", " ").strip())
        reference, coref_units = replace_coreferences(resolved["document"],
                                                      resolved["clusters"])
    sentences = (sentence.strip() for sentence in nltk.sent_tokenize(reference.strip()))
    return ReferenceSentences([frames(sentence) for sentence in sentences if sentence],
                              coref_units)


def reference_units(reference: str, frames: FrameSource,
                    coref: CorefSource | None = None) -> list[str]:
    """The STUs of one reference summary."""
    return reference_sentences(reference, frames, coref).stus()


class RecordedFrames:
    """Frames recorded in a JSONL file: {"sentence", "words", "verbs": [{"tags"}, ...]} per
    line; a sentence without a record is an error naming it."""

    def __init__(self, path: str | Path):
        self.path, self.frames = str(path), {}
        for line, record in jsonl_records(path, ("sentence", "words", "verbs")):
            if not isinstance(record["words"], list) or not isinstance(record["verbs"], list) \
                    or any(len(verb.get("tags", ())) != len(record["words"])
                           for verb in record["verbs"] if isinstance(verb, dict)):
                raise DataError("expected words and verbs whose tags match the words in "
                                "number", path=self.path, line=line, field="verbs")
            self.frames[record["sentence"]] = record

    def __call__(self, sentence: str) -> Frame:
        if sentence not in self.frames:
            raise SumbenchError(f"{self.path} has no frames for the sentence {sentence!r}")
        return self.frames[sentence]


class RecordedCoref:
    """Coreference recorded in a JSONL file: {"text", "document", "clusters"} per line."""

    def __init__(self, path: str | Path):
        self.path = str(path)
        self.outputs = {record["text"]: record
                        for _, record in jsonl_records(path, ("text", "document", "clusters"))}

    def __call__(self, text: str) -> Mapping[str, Any]:
        if text not in self.outputs:
            raise SumbenchError(f"{self.path} has no coreference output for {text[:60]!r}")
        return self.outputs[text]


def jsonl_records(path: str | Path, fields: Sequence[str]):
    """(line, record) of a JSON-lines file of model outputs, each record holding `fields`
    (a missing one is an error naming the file, line and field)."""
    for line, record in iter_jsonl(Path(path)):
        missing = [name for name in fields if name not in record]
        if missing:
            raise DataError("missing key", path=str(path), line=line, field=missing[0])
        yield line, record
