"""BERTScore as registered evaluators: `bertscore-r`, `bertscore-p` and `bertscore-f` (one
class, a side each), bert-score 0.3.13's computation (`roberta-large` at layer 17, no idf, no
baseline rescaling, each side the best over a summary's references), for `sumbench meta-eval
--metric bertscore-r [--metric-option model=DIR ...]` and board columns
(`NAME=evaluator:bertscore-r,model=DIR,layer=17`).

Options (OPTIONS): `model` (hub id or folder), `layer` (default: bert-score's layer for a model
it knows by name; a folder needs one), `batch_size` (texts a forward pass; scores do not
depend on it) and `device`. The encoder is kept per process (tasks.plumbing.kept, by model,
layer and device) with the embeddings of the texts it has seen, so the three sides and system
after system share one model and the references are embedded once. An empty summary or
reference scores 0 (bert-score 0.3.13 fails on one under transformers 5).
"""
from __future__ import annotations

import importlib.util
import time
from collections.abc import Mapping, Sequence
from typing import Any

from leaderboard.evaluators.bertscore.encoder import (
    DEFAULT_MODEL,
    Encoder,
    default_layer,
    load_encoder,
)
from leaderboard.evaluators.bertscore.matching import best_over_references, match_pairs
from tasks.metrics.evaluator_base import option_values, positive_int
from tasks.metrics.evaluators import EVALUATORS, Evaluator, register_evaluator
from tasks.plumbing.errors import SumbenchError
from tasks.plumbing.kept import kept_model
from trainers.inference.generation import resolve_device

#: side -> its position in (P, R, F)
SIDES = {"p": 0, "r": 1, "f": 2}
SIDE_NAMES = {"p": "precision", "r": "recall", "f": "F1"}


def _layer(text: str) -> int:
    value = int(str(text).strip())
    if value < 0:
        raise ValueError("expected a layer number >= 0")
    return value


#: option -> (parser of its text, default)
OPTIONS: dict[str, tuple[Any, Any]] = {
    "model": (str, DEFAULT_MODEL), "layer": (_layer, None), "batch_size": (positive_int, 64),
    "device": (str, "auto"),
}


def parse_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """Every option's value, `options` (text or already parsed) over the defaults; the layer
    filled in from bert-score's table when not given."""
    values = option_values(options, OPTIONS, "BERTScore")
    if values["layer"] is None:
        values["layer"] = default_layer(values["model"])
    return values


def shared_encoder(model: str, layer: int, device: str) -> Encoder:
    """The encoder of `model` at `layer` on `device`, kept per process."""
    device = resolve_device(device)
    return kept_model("bertscore encoders", (model, layer, device),
                      lambda: load_encoder(model, layer, device=device))


class BertScoreEvaluator(Evaluator):
    """One side (`side`: "p", "r" or "f") of BERTScore (see the module)."""

    reads_references = True
    option_names = tuple(OPTIONS)
    model_options = ("model",)

    def __init__(self, side: str, options: Mapping[str, Any] | None = None,
                 encoder: Encoder | None = None):
        if side not in SIDES:
            raise SumbenchError(f"BERTScore side must be one of {', '.join(SIDES)}; got "
                                f"{side!r}")
        self.side, self.name = side, f"bertscore-{side}"
        self.given = dict(options or {})  # a new model without a layer gets its own default
        self.values = parse_options(self.given)
        self.encoder, self.last = encoder, None

    def with_options(self, options: Mapping[str, Any]) -> BertScoreEvaluator:
        return BertScoreEvaluator(self.side, {**self.given, **options})

    def problem(self) -> str | None:
        if self.values["layer"] is not None:
            return None
        if importlib.util.find_spec("bert_score") is None:
            return (f"{self.name}: the default layer of the model {self.values['model']!r} "
                    f"comes from bert-score's table, and bert-score is not installed: pip "
                    f"install 'sumbench[bertscore]', or give layer=N")
        return (f"{self.name}: bert-score has no default layer for the model "
                f"{self.values['model']!r}: give layer=N")

    @property
    def settings(self) -> dict:
        revision = self.encoder.revision if self.encoder is not None else None
        return {"evaluator": self.name, "implementation": "bert-score 0.3.13's computation",
                "value": SIDE_NAMES[self.side], "model": self.values["model"],
                "layer": self.values["layer"], "idf": False, "rescale_with_baseline": False,
                "prefix_space": "kept (GPT-2 and RoBERTa tokenizers)",
                "references": "best per side", **({"revision": revision} if revision else {})}

    def cost(self) -> dict | None:
        return self.last

    def score(self, summaries: Sequence[str], references: Sequence[Sequence[str]],
              sources: Sequence[str] | None) -> list[float]:
        lists = _reference_lists(self.name, summaries, references)
        problem = self.problem()
        if problem:
            raise SumbenchError(problem)
        started = time.perf_counter()
        if self.encoder is None:
            self.encoder = shared_encoder(self.values["model"], self.values["layer"],
                                          self.values["device"])
        before = self.encoder.embedded
        table = self.encoder.embed([*summaries, *(text for texts in lists for text in texts)],
                                   self.values["batch_size"])
        owners = [number for number, texts in enumerate(lists) for _ in texts]
        pairs = match_pairs([table.get(summaries[number].strip()) for number in owners],
                            [table.get(text.strip()) for texts in lists for text in texts])
        by_summary: list[list[tuple]] = [[] for _ in summaries]
        for number, scores in zip(owners, pairs):
            by_summary[number].append(scores)
        values = [best_over_references(scores)[SIDES[self.side]] for scores in by_summary]
        self.last = {"seconds": round(time.perf_counter() - started, 3),
                     "texts_embedded": self.encoder.embedded - before}
        return values


def _reference_lists(name: str, summaries: Sequence[str],
                     references: Sequence[Sequence[str]]) -> list[tuple[str, ...]]:
    """Each summary's references (a lone text is one); a count that differs from the
    summaries', or a summary without references, is a one-line error."""
    if len(references) != len(summaries):
        raise SumbenchError(f"evaluator {name!r}: {len(references)} reference lists for "
                            f"{len(summaries)} summaries")
    lists = [(texts,) if isinstance(texts, str) else tuple(texts) for texts in references]
    for number, texts in enumerate(lists, 1):
        if not texts:
            raise SumbenchError(f"evaluator {name!r}: summary {number} has no reference")
        if not all(isinstance(text, str) for text in texts):
            raise SumbenchError(f"evaluator {name!r}: summary {number}'s references are not "
                                f"all texts")
    return lists


def register() -> None:
    """Add `bertscore-p`, `bertscore-r` and `bertscore-f` (roberta-large, layer 17) to the
    evaluator registry, once per process."""
    for side in SIDES:
        if f"bertscore-{side}" not in EVALUATORS:
            register_evaluator(f"bertscore-{side}", BertScoreEvaluator(side))
