"""Model-backed heuristics for tasks.usb.heuristic: SuperPAL-style evidence alignment and
FactEdit-style infilling corruptions. Models are loaded by name with `from_pretrained` (a hub
id or a local folder); nothing here is needed for the built-in heuristics, which run offline.

- `superpal_evidence(model)`: a sequence-pair classifier scores (summary sentence, source
  line) pairs; the aligned class is the label whose name contains "align" or "entail"
  (else the last class). Evidence = lines with probability >= 0.5, else the best line.
- `infill_corruption(model)`: a span of the sentence (a name, year or number) is replaced by
  T5's first sentinel `<extra_id_0>` and a seq2seq model fills it in; the filled-in span,
  when it differs from the original, makes the corruption (type "infill").
"""
from __future__ import annotations

import random
import re
from collections.abc import Sequence
from typing import Any

from tasks.plumbing.errors import SumbenchError
from tasks.usb.corruptions import Corruption, names
from trainers.models.model_loading import (
    check_model_source,
    load_errors,
    load_failure,
    resolve_model_path,
)

SENTINEL, NEXT_SENTINEL = "<extra_id_0>", "<extra_id_1>"


def _load(model: str, auto_class: str):
    import transformers

    check_model_source(model)
    source = resolve_model_path(model)
    try:
        tokenizer = transformers.AutoTokenizer.from_pretrained(source)
        loaded = getattr(transformers, auto_class).from_pretrained(source).eval()
    except load_errors() as error:
        raise load_failure(model, error) from None
    return loaded, tokenizer


def aligned_index(id2label: dict | None) -> int:
    labels = {int(index): str(name).lower() for index, name in (id2label or {}).items()}
    for index, name in sorted(labels.items()):
        if "align" in name or "entail" in name:
            return index
    return max(labels) if labels else 1


def superpal_evidence(model: str, batch_size: int = 32):
    """An EvidenceFn backed by an alignment classifier."""
    import torch

    classifier, tokenizer = _load(model, "AutoModelForSequenceClassification")
    target = aligned_index(getattr(classifier.config, "id2label", None))

    def probabilities(sentence: str, lines: Sequence[str]) -> list[float]:
        values = []
        for start in range(0, len(lines), batch_size):
            chunk = list(lines[start:start + batch_size])
            batch = tokenizer([sentence] * len(chunk), chunk, padding=True, truncation=True,
                              return_tensors="pt")
            with torch.no_grad():
                logits = classifier(**batch).logits
            values.extend(torch.softmax(logits, dim=-1)[:, target].tolist())
        return values

    def evidence(sentences: Sequence[str], source: Sequence[dict]) -> list[list[int]]:
        candidates = [j for j, line in enumerate(source) if not line["is_header"]]
        chosen = []
        for sentence in sentences:
            probs = probabilities(sentence, [source[j]["txt"] for j in candidates])
            picked = [j for j, p in zip(candidates, probs) if p >= 0.5]
            if not picked and candidates:
                picked = [candidates[max(range(len(probs)), key=probs.__getitem__)]]
            chosen.append(picked)
        return chosen

    return evidence


def maskable_spans(sentence: str) -> list[str]:
    """Spans an infilling model may replace: names, years and numbers of the sentence."""
    return sorted(set(names(sentence)) | set(re.findall(r"\b\d+(?:[.,]\d+)?\b", sentence)))


def filled_span(decoded: str) -> str:
    """The infilled text from a decoded generation (between the first two sentinels)."""
    text = decoded.split(SENTINEL, 1)[-1].split(NEXT_SENTINEL, 1)[0]
    return re.sub(r"</?s>|<pad>", "", text).strip()


def infill_corruption(model: str, max_new_tokens: int = 8):
    """A CorruptFn that masks one span and lets a seq2seq model fill it in."""
    import torch

    generator, tokenizer = _load(model, "AutoModelForSeq2SeqLM")

    def corruption(sentence: str, context: str, rng: random.Random) -> Corruption | None:
        spans = maskable_spans(sentence)
        if not spans:
            return None
        old = rng.choice(spans)
        masked = re.sub(r"\b" + re.escape(old) + r"\b", SENTINEL, sentence, count=1)
        batch = tokenizer([masked], return_tensors="pt")
        with torch.no_grad():
            output = generator.generate(**batch, max_new_tokens=max_new_tokens, do_sample=False,
                                        num_beams=1)
        new = filled_span(tokenizer.decode(output[0], skip_special_tokens=False))
        if not new or new == old:
            return None
        return Corruption(masked.replace(SENTINEL, new, 1), "infill", old, new)

    return corruption


def model_heuristics(evidence: str, corruption: str, superpal_model: str | None,
                     infill_model: str | None) -> dict[str, Any]:
    """The model-backed callables a HeuristicSpec needs (empty for built-in methods)."""
    functions: dict[str, Any] = {}
    if evidence == "superpal":
        if not superpal_model:
            raise SumbenchError("--evidence superpal needs --superpal-model (a hub id or "
                                "local folder of an alignment classifier)")
        functions["evidence_fn"] = superpal_evidence(superpal_model)
    if corruption == "infill":
        if not infill_model:
            raise SumbenchError("--corruption infill needs --infill-model (a hub id or local "
                                "folder of a seq2seq model)")
        functions["corrupt_fn"] = infill_corruption(infill_model)
    return functions
