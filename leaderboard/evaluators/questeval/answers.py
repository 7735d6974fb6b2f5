"""QuestEval's answers: the spans of a text that questions are generated for (M:561-580).

By default spaCy (`en_core_web_sm`, or any pipeline by name): the entities, then the noun
chunks, of the first five sentences (the official splitter's, `split_on_punct`, joined with
one space and parsed again), in document order, duplicates kept. v0.1.1 (and the `paper`
protocol) take them sentence by sentence, each with its sentence (the question's context)
and the sentence's index (the weighter's input).

`RecordedAnswers` reads them from a JSON Lines file instead, `{"text", "answers": [...],
"sentence_answers"?: [[...], ...]}` (the lists of the first five sentences, for v0.1.1 and
`paper`), for machines without a spaCy model; the sentences still come from the official
splitter over spaCy's blank English tokenizer.
"""
from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from tasks.metrics.questeval import split_on_punct
from tasks.plumbing.errors import DataError, SumbenchError
from tasks.plumbing.io import read_jsonl
from tasks.plumbing.spacy_loader import (
    DEFAULT_PIPELINE,
    blank_english,
    spacy_module,
    spacy_pipeline,
)

LIMIT_SENTENCES = 5


def sentences(nlp: Any, text: str) -> list[str]:
    """The official splitter's sentences of `text` (U:41-45)."""
    doc = nlp.make_doc(text) if hasattr(nlp, "make_doc") else nlp(text)
    return split_on_punct([(token.text, token.is_punct, token.idx) for token in doc], text)


class SpacyAnswers:
    """Entities, then noun chunks, from a spaCy pipeline."""

    def __init__(self, nlp: Any, name: str):
        self.nlp, self.name = nlp, name
        spacy = spacy_module("questeval")
        self.description = {"answers": "spacy", "pipeline": name, "spacy": spacy.__version__,
                            "model": nlp.meta.get("version"), "limit_sentences":
                                LIMIT_SENTENCES}

    @classmethod
    def load(cls, name: str = DEFAULT_PIPELINE) -> SpacyAnswers:
        return cls(spacy_pipeline(name, extra="questeval", hint=(
            ", or give recorded answers (--answers FILE): QuestEval's answers are its "
            "entities and noun chunks")), name)

    def _spans(self, text: str) -> list[str]:
        doc = self.nlp(text)
        try:
            chunks = [chunk.text for chunk in doc.noun_chunks]
        except ValueError as error:  # E029: no dependency parse
            raise SumbenchError(f"spaCy pipeline {self.name!r} finds no noun chunks (it has no "
                                f"parser: {str(error)[:120]})") from None
        return [entity.text for entity in doc.ents] + chunks

    def answers(self, text: str) -> list[str]:
        return self._spans(" ".join(sentences(self.nlp, text)[:LIMIT_SENTENCES]))

    def sentence_answers(self, text: str) -> list[tuple[str, list[str]]]:
        return [(sentence, self._spans(sentence))
                for sentence in sentences(self.nlp, text)[:LIMIT_SENTENCES]]


class RecordedAnswers:
    """Answers recorded per text (see the module)."""

    def __init__(self, path: str | Path):
        self.nlp, self.by_text = blank_english("questeval"), {}
        path = Path(path)
        for number, record in enumerate(read_jsonl(path), start=1):
            where = {"path": str(path), "line": number}
            if not isinstance(record, dict) or not isinstance(record.get("text"), str):
                raise DataError("expected an object with a string `text`", field="text",
                                **where)
            for field in ("answers", "sentence_answers"):
                if field in record and not _strings(record[field], nested=field != "answers"):
                    raise DataError("expected a list of strings" + (
                        " per sentence" if field != "answers" else ""), field=field, **where)
            if "answers" not in record:
                raise DataError("missing field", field="answers", **where)
            self.by_text[record["text"]] = record
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        self.description = {"answers": "recorded", "file": path.name, "sha256": digest,
                            "limit_sentences": LIMIT_SENTENCES}

    def _record(self, text: str) -> dict:
        record = self.by_text.get(text)
        if record is None:
            raise DataError(f"no recorded answers for the text {text[:60]!r}", field="text")
        return record

    def answers(self, text: str) -> list[str]:
        return list(self._record(text)["answers"])

    def sentence_answers(self, text: str) -> list[tuple[str, list[str]]]:
        record = self._record(text)
        if "sentence_answers" not in record:
            raise DataError(f"no recorded answers per sentence (`sentence_answers`, which the "
                            f"v0.1.1 and paper protocols read) for {text[:60]!r}",
                            field="sentence_answers")
        found = sentences(self.nlp, text)[:LIMIT_SENTENCES]
        lists = record["sentence_answers"]
        if len(lists) != len(found):
            raise DataError(f"{len(lists)} lists of answers for the {len(found)} first "
                            f"sentences of {text[:60]!r}", field="sentence_answers")
        return list(zip(found, [list(answers) for answers in lists]))


def _strings(value: Any, nested: bool) -> bool:
    if not isinstance(value, list):
        return False
    if nested:
        return all(_strings(item, False) for item in value)
    return all(isinstance(item, str) for item in value)


def answer_source(answers_file: str | None, pipeline: str | None) -> Any:
    """Recorded answers when a file is given, else the spaCy pipeline by name."""
    if answers_file is not None:
        return RecordedAnswers(answers_file)
    return SpacyAnswers.load(pipeline or DEFAULT_PIPELINE)
