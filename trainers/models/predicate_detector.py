"""A QASem-style predicate detector: a token-classification model loaded by name that marks
the predicate words of a reference summary (for AutoQAPyramid's QA generation), or the verbs
SRL frames are made for (`sumbench stus --srl-model`; there its target is the words spaCy tags
VERB or AUX, as the official SRL predictor's).

The model tags tokens; a word is a predicate when its first sub-token's most likely class is
the predicate class: the label whose name (in the model's `id2label`) contains "pred", "verb"
or is "V"/"B-V" (any case), else index 1 of a two-class head. Words are the Treebank tokens
of the summary (punctuation never counts); each predicate occurrence gives one entry, in
text order, so a verb used twice is generated for twice, as gold predicates are.
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from tasks.plumbing.errors import SumbenchError
from tasks.plumbing.text import treebank_words
from trainers.models.model_loading import (
    check_model_source,
    load_errors,
    load_failure,
    resolve_model_path,
)

PREDICATE_NAMES = ("pred", "verb")


def predicate_index(id2label: Mapping | None) -> int:
    labels = {int(index): str(name).lower() for index, name in (id2label or {}).items()}
    for index, name in sorted(labels.items()):
        if any(key in name for key in PREDICATE_NAMES) or name in ("v", "b-v"):
            return index
    if len(labels) == 2 or not labels:
        return 1
    raise SumbenchError(f"cannot tell the predicate class of the detector's labels "
                        f"{sorted(labels.values())}: name it with 'pred' or 'verb'")


class PredicateDetector:
    """`detector(text) -> [predicate word, ...]` from a token-classification model."""

    def __init__(self, model: str, *, revision: str | None = None, device: str = "cpu",
                 max_length: int = 512):
        import transformers

        check_model_source(model, "predicate detector")
        source = resolve_model_path(model)
        try:
            self.tokenizer = transformers.AutoTokenizer.from_pretrained(source,
                                                                        revision=revision)
            self.model = transformers.AutoModelForTokenClassification.from_pretrained(
                source, revision=revision).to(device).eval()
        except load_errors() as error:
            raise load_failure(model, error, "predicate detector") from None
        self.name, self.device, self.max_length = model, device, max_length
        self.target = predicate_index(getattr(self.model.config, "id2label", None))

    def words(self, text: str) -> list[str]:
        return treebank_words(text)

    def __call__(self, text: str) -> list[str]:
        words = self.words(text)
        return [words[index] for index in self.positions(words)]

    def positions(self, words: list[str]) -> list[int]:
        """The positions of the predicate words among `words`, in order."""
        import torch

        if not words:
            return []
        encoded = self.tokenizer(words, is_split_into_words=True, truncation=True,
                                 max_length=self.max_length, return_tensors="pt")
        with torch.no_grad():
            logits = self.model(**{k: v.to(self.device) for k, v in encoded.items()}).logits[0]
        classes = logits.argmax(-1).tolist()
        found, seen = [], set()
        for position, word_index in enumerate(encoded.word_ids()):
            if word_index is None or word_index in seen:
                continue
            seen.add(word_index)
            if classes[position] == self.target and re.search(r"\w", words[word_index]):
                found.append(word_index)
        return found

    def fingerprint(self) -> dict[str, Any]:
        return {"model": self.name, "predicate_class": self.target}
