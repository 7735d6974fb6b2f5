"""METEOR as QAPyramid's comparison computes it: NLTK's own `meteor_score` (nltk 3.10.4,
`nltk/translate/meteor_score.py`), called as Hugging Face `evaluate`'s `meteor` calls it, but
one summary at a time.

- Tokens: `nltk.word_tokenize` of the summary and of each reference (NLTK's rules of the
  installed version, on sumbench's shipped English Punkt: tasks.plumbing.punkt); NLTK
  lower-cases them (`preprocess=str.lower`).
- Alignment in three stages (exact, Porter stem, WordNet 3.0 synonyms), then
  score = (1 - γ·(chunks/matches)^β) · P·R / (αP + (1-α)R), with α 0.9, β 3, γ 0.5; 0 where
  NLTK divides by zero (an empty summary or reference, no match).
- Several references: the best score (NLTK's `meteor_score` takes the max).

WordNet is NLTK's reader over a WordNet 3.0 folder (tasks.metrics.wordnet: Debian's
`wordnet-base`, the option `wordnet=DIR`, $SUMBENCH_WORDNET or NLTK's data path); a missing
one is what `problem()` reports, so a board refuses the column at init. The evaluator is
registered as `meteor` (tasks.metrics.evaluators).
"""
from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from tasks.metrics.evaluator_base import Evaluator
from tasks.metrics.wordnet import find_wordnet, load_wordnet, wordnet_version
from tasks.plumbing.errors import SumbenchError, check_choices

#: NLTK's (and `evaluate`'s) parameters
DEFAULT_PARAMETERS = {"alpha": 0.9, "beta": 3.0, "gamma": 0.5}
OPTION_NAMES = ("wordnet", *DEFAULT_PARAMETERS)
TOKENIZER = "nltk.word_tokenize (shipped English Punkt), lower-cased by NLTK"


def tokens(text: str) -> list[str]:
    """`nltk.word_tokenize(text)`, as `evaluate`'s meteor tokenizes (case kept: NLTK's
    METEOR lower-cases); importing `tasks` gave NLTK the shipped English Punkt."""
    import nltk

    return nltk.word_tokenize(text)


def meteor(summary_tokens: Sequence[str], reference_tokens: Sequence[Sequence[str]],
           wordnet, parameters: Mapping[str, float] | None = None) -> float:
    """NLTK's `meteor_score` of one tokenized summary against its tokenized references."""
    from nltk.translate.meteor_score import meteor_score

    return float(meteor_score([list(tokens) for tokens in reference_tokens],
                              list(summary_tokens), wordnet=wordnet,
                              **{**DEFAULT_PARAMETERS, **(parameters or {})}))


def _parameter(name: str, text: Any) -> float:
    try:
        value = float(str(text).strip())
    except ValueError:
        raise SumbenchError(f"meteor option {name}={text!r}: expected a number") from None
    if not value >= 0 or value == float("inf"):
        raise SumbenchError(f"meteor option {name}={text!r}: expected a finite number >= 0")
    return value


class MeteorEvaluator(Evaluator):
    """NLTK's METEOR of each summary, the best over its references (see the module).
    `wordnet_reader` (an object with NLTK's `synsets(word)`) replaces the WordNet folder."""

    name = "meteor"
    reads_sources, reads_references = False, True
    option_names = OPTION_NAMES
    model_options: tuple[str, ...] = ()

    def __init__(self, wordnet: str | None = None, parameters: Mapping[str, float] | None = None,
                 wordnet_reader=None):
        self.wordnet_option = wordnet
        self.parameters = {**DEFAULT_PARAMETERS, **(parameters or {})}
        self.wordnet_reader = wordnet_reader
        self._cost: dict | None = None

    def with_options(self, options: Mapping[str, Any]) -> MeteorEvaluator:
        if not options:
            return self
        check_choices(sorted(options), self.option_names, f"{self.name} option")
        parameters = dict(self.parameters)
        parameters.update({name: _parameter(name, value) for name, value in options.items()
                           if name in DEFAULT_PARAMETERS})
        folder = str(options["wordnet"]) if "wordnet" in options else self.wordnet_option
        reader = self.wordnet_reader if "wordnet" not in options else None
        return MeteorEvaluator(folder, parameters, reader)

    def reader(self):
        """NLTK's WordNet reader this evaluator aligns synonyms with (a SumbenchError when
        there is no WordNet; the folder is looked up on each call, its reader read once)."""
        if self.wordnet_reader is None:
            return load_wordnet(find_wordnet(self.wordnet_option))
        return self.wordnet_reader

    def problem(self) -> str | None:
        if self.wordnet_reader is not None:
            return None
        try:
            find_wordnet(self.wordnet_option)
        except SumbenchError as error:
            return f"evaluator 'meteor': {error}"
        return None

    @property
    def settings(self) -> dict:
        import nltk

        return {"evaluator": self.name, "implementation": "nltk.translate.meteor_score",
                "nltk": nltk.__version__, **self.parameters, "tokenizer": TOKENIZER,
                "references": "best score", **self._wordnet_settings()}

    def _wordnet_settings(self) -> dict:
        if self.wordnet_reader is not None and not hasattr(self.wordnet_reader, "get_version"):
            return {"wordnet": type(self.wordnet_reader).__name__}
        try:
            folder = find_wordnet(self.wordnet_option)
        except SumbenchError:
            return {"wordnet": None}
        return {"wordnet": str(folder), "wordnet_version": wordnet_version(load_wordnet(folder))}

    def cost(self) -> dict | None:
        return self._cost

    def score(self, summaries, references, sources) -> list[float]:
        if len(references) != len(summaries):
            raise SumbenchError(f"evaluator 'meteor': {len(references)} reference lists for "
                                f"{len(summaries)} summaries")
        empty = next((index for index, texts in enumerate(references) if not texts), None)
        if empty is not None:
            raise SumbenchError(f"evaluator 'meteor': summary {empty + 1} has no reference")
        started, reader = time.perf_counter(), self.reader()
        values = [meteor(tokens(summary), [tokens(text) for text in texts], reader,
                         self.parameters) for summary, texts in zip(summaries, references)]
        self._cost = {"seconds": time.perf_counter() - started}
        return values
