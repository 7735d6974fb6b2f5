"""QA-pair metrics for QA generation: parsing, linearisation, UA, ROUGE-L, optional BERTScore.

Linearisation (`linearize_qas`): "q1? a1 | q2? a2" — each pair as "question? answer", pairs
joined by " | ". `parse_qa_list` reads it back, tolerating extra spaces, newlines or ";" as
separators, a missing "?" (see `tasks.qapyramid.units.split_qa`) and empty output.

UA (unlabeled argument detection), computed per predicate then pooled (micro):
- answers are compared as bags of lower-cased tokens (rouge-score's tokenizer: alphanumeric
  runs, punctuation dropped); token IoU = |A ∩ B| / |A ∪ B| over the two multisets;
- a generated and a gold answer match when IoU >= `threshold` (default 0.5, the usual QA-SRL
  span-matching rule); matching is one-to-one, greedy by descending IoU (ties: gold order, then
  generated order), so a duplicated generated answer cannot match one gold answer twice;
  `threshold=0` means "any shared token";
- precision = matched / generated answers, recall = matched / gold answers, F1 their harmonic
  mean (0 when undefined). Questions do not enter UA (it is "unlabeled").

BERTScore (`bertscore`) is computed only when the caller gives a model path: greedy cosine
matching of contextual token embeddings (special tokens excluded, no idf weighting, no baseline
rescaling), from `layer` (default: the last hidden layer). It is built on transformers, so no
`bert-score` package is required.
"""
from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

from tasks.metrics.rouge import rouge_scores, rouge_tokens
from tasks.plumbing.errors import SumbenchError

#: words that stand for a QA unit's answer in a question without "?" ("someone did what")
PLACEHOLDERS = frozenset({"someone", "something", "somewhere", "somebody", "anyone",
                          "anything"})
_QUESTION_END = re.compile(r"\?")


def split_qa(text: str) -> tuple[str, str]:
    """ "question? answer" -> ("question?", "answer"), split at the first "?".

    Without a "?", the question runs to the last placeholder word (someone/something/...)
    and the rest is the answer; with no placeholder either, the whole text is the question.
    """
    text = " ".join(text.split())
    match = _QUESTION_END.search(text)
    if match:
        return text[:match.end()].strip(), text[match.end():].strip()
    words = text.split(" ")
    cut = max((i for i, word in enumerate(words) if word.lower() in PLACEHOLDERS), default=-1)
    if cut < 0:
        return text, ""
    return " ".join(words[:cut + 1]), " ".join(words[cut + 1:])


def join_qa(question: str, answer: str) -> str:
    """The QA as one unit string "question? answer" (a "?" added when missing)."""
    question = question.strip()
    if question and not question.endswith("?"):
        question += "?"
    return f"{question} {answer.strip()}".strip()


QAPair = tuple[str, str]
PAIR_SEPARATOR = " | "


def linearize_qas(pairs: Sequence[Sequence[str]]) -> str:
    """ "q1? a1 | q2? a2" (see module docstring)."""
    return PAIR_SEPARATOR.join(join_qa(question, answer) for question, answer in pairs)


def parse_qa_list(text: str) -> list[QAPair]:
    """Generated text -> [(question, answer), ...]; items without any word are dropped."""
    import re

    pairs = []
    for item in re.split(r"\s*(?:\||\n|;)\s*", text or ""):
        item = item.strip()
        if not any(character.isalnum() for character in item):
            continue
        pairs.append(split_qa(item))
    return pairs


# ---- UA ---------------------------------------------------------------------------------
def answer_tokens(answer: str) -> Counter:
    return Counter(rouge_tokens(answer))


def token_iou(first: Counter, second: Counter) -> float:
    """Multiset intersection over union (0 when both are empty)."""
    union = sum((first | second).values())
    return sum((first & second).values()) / union if union else 0.0


def matched_answers(generated: Sequence[str], gold: Sequence[str],
                    threshold: float = 0.5) -> list[tuple[int, int]]:
    """One-to-one (gold index, generated index) matches with token IoU >= threshold."""
    generated_bags = [answer_tokens(answer) for answer in generated]
    gold_bags = [answer_tokens(answer) for answer in gold]
    candidates = []
    for g, gold_bag in enumerate(gold_bags):
        for p, generated_bag in enumerate(generated_bags):
            iou = token_iou(gold_bag, generated_bag)
            if iou >= threshold and iou > 0:
                candidates.append((-iou, g, p))
    used_gold, used_generated, matches = set(), set(), []
    for _, g, p in sorted(candidates):
        if g not in used_gold and p not in used_generated:
            used_gold.add(g)
            used_generated.add(p)
            matches.append((g, p))
    return sorted(matches)


def ua_counts(generated: Sequence[str], gold: Sequence[str],
              threshold: float = 0.5) -> tuple[int, int, int]:
    """(matched, generated answers, gold answers) for one predicate."""
    return len(matched_answers(generated, gold, threshold)), len(generated), len(gold)


def prf(matched: int, predicted: int, gold: int) -> dict:
    precision = matched / predicted if predicted else 0.0
    recall = matched / gold if gold else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1}


def ua_scores(generated_answers: Sequence[Sequence[str]], gold_answers: Sequence[Sequence[str]],
              threshold: float = 0.5) -> dict:
    """Micro UA precision/recall/F1 over predicates (one answer list per predicate)."""
    if len(generated_answers) != len(gold_answers):
        raise ValueError(f"{len(generated_answers)} generated but {len(gold_answers)} gold "
                         f"answer lists")
    totals = [0, 0, 0]
    for generated, gold in zip(generated_answers, gold_answers):
        for position, count in enumerate(ua_counts(generated, gold, threshold)):
            totals[position] += count
    return {f"ua_{key}": value for key, value in prf(*totals).items()}


def qa_rougel(generated: Sequence[Sequence[QAPair]], gold: Sequence[Sequence[QAPair]]) -> float:
    """Mean ROUGE-L F between the linearised generated and gold QA lists."""
    return rouge_scores([linearize_qas(pairs) for pairs in generated],
                        [linearize_qas(pairs) for pairs in gold])["rougel"]


# ---- BERTScore (optional) ----------------------------------------------------------------
BERTSCORE_KEYS = ("bertscore_precision", "bertscore_recall", "bertscore_f1")


class BertScoreUnavailable(SumbenchError):
    """BERTScore was requested without a usable model."""


def _token_embeddings(texts: Sequence[str], tokenizer, model, layer: int | None, batch_size: int):
    import torch

    embeddings = []
    for start in range(0, len(texts), batch_size):
        batch = tokenizer(list(texts[start:start + batch_size]), padding=True, truncation=True,
                          return_tensors="pt", return_special_tokens_mask=True)
        special = batch.pop("special_tokens_mask").bool()
        with torch.no_grad():
            output = model(input_ids=batch["input_ids"],
                           attention_mask=batch["attention_mask"], output_hidden_states=True)
        hidden = output.hidden_states[-1 if layer is None else layer]
        keep = batch["attention_mask"].bool() & ~special
        for row in range(hidden.shape[0]):
            vectors = hidden[row][keep[row]]
            embeddings.append(torch.nn.functional.normalize(vectors, dim=-1))
    return embeddings


def bertscore_per_example(predictions: Sequence[str], references: Sequence[str],
                          model_path: str | None, layer: int | None = None,
                          batch_size: int = 16) -> list[dict]:
    """BERTScore precision/recall/F1 of each (prediction, reference) pair (see module
    docstring) with the encoder at `model_path`; a pair with an empty side scores 0. A clear
    error when no path is given."""
    if not model_path:
        raise BertScoreUnavailable(
            "BERTScore needs a model: pass a local model path or hub id (e.g. "
            "bertscore_model=...); it is never downloaded implicitly")
    if len(predictions) != len(references):
        raise ValueError(f"{len(predictions)} predictions but {len(references)} references")
    from transformers import AutoModel, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_path)
    model = AutoModel.from_pretrained(model_path).eval()
    encoder = getattr(model, "encoder", None) if model.config.is_encoder_decoder else None
    predicted = _token_embeddings(predictions, tokenizer, encoder or model, layer, batch_size)
    gold = _token_embeddings(references, tokenizer, encoder or model, layer, batch_size)
    values = []
    for candidate, reference in zip(predicted, gold):
        precision = recall = f1 = 0.0
        if len(candidate) and len(reference):
            similarity = candidate @ reference.T
            precision = float(similarity.max(dim=1).values.mean())
            recall = float(similarity.max(dim=0).values.mean())
            f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        values.append(dict(zip(BERTSCORE_KEYS, (precision, recall, f1))))
    return values


def bertscore(predictions: Sequence[str], references: Sequence[str], model_path: str | None,
              layer: int | None = None, batch_size: int = 16) -> dict:
    """Mean BERTScore precision/recall/F1 over the pairs (`bertscore_per_example`)."""
    values = bertscore_per_example(predictions, references, model_path, layer, batch_size)
    count = max(len(values), 1)
    return {key: sum(example[key] for example in values) / count for key in BERTSCORE_KEYS}
