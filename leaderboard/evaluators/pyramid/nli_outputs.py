"""NLI classifier outputs: which class is entailment, and Lite²Pyramid's p3/p2/label3/label2.

Pure functions of a model config's label maps and one pair's logits (no torch), used by the
`nli` presence backend (`leaderboard.evaluators.pyramid.presence_models`), which documents the
outputs.
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from leaderboard.evaluators.pyramid.presence import PresenceBackendError


def _label_indices(pairs: Iterable[tuple[Any, Any]], target: str) -> list[int]:
    """The indices paired with label name `target` (case-insensitive) in (name, index) pairs."""
    return sorted({int(index) for name, index in pairs if str(name).lower() == target})


def entailment_index(id2label: Mapping | None, label2id: Mapping | None = None,
                     wanted: str | None = None) -> int:
    """The class index of label `wanted` (default "entailment"), matched case-insensitively.

    The logits are indexed as `id2label` says, so it decides; `label2id` is used only when
    `id2label` is missing, and one that maps the label elsewhere is an error (a stale map)."""
    target = (wanted or "entailment").lower()
    hint = ("pass entailment_label=<its name> (--entailment-label) for a checkpoint with "
            "other label names")
    if id2label:
        found = _label_indices(((name, i) for i, name in id2label.items()), target)
        if len(found) != 1:
            raise PresenceBackendError(f"the model's id2label {dict(id2label)} has no single "
                                       f"{target!r} label; {hint}")
        stale = [i for i in _label_indices((label2id or {}).items(), target) if i != found[0]]
        if stale:
            raise PresenceBackendError(
                f"the model config disagrees on the {target!r} label: id2label puts it at "
                f"index {found[0]}, label2id at {stale[0]}; fix the checkpoint's config.json "
                f"(the logits follow id2label)")
        return found[0]
    found = _label_indices((label2id or {}).items(), target)
    if len(found) != 1:
        raise PresenceBackendError(f"the model config has no id2label and its label2id "
                                   f"{dict(label2id or {})} has no single {target!r} label; "
                                   f"{hint}")
    return found[0]


#: Lite²Pyramid's NLI input length (tokens of the summary-unit pair)
NLI_MAX_LENGTH = 400


def nli_outputs(logits: Sequence[float], entail: int) -> dict:
    """p3, p2, label3, label2 from one pair's logits (see module docstring)."""
    top = max(logits)
    exp = [math.exp(value - top) for value in logits]
    rest = sum(value for i, value in enumerate(logits) if i != entail)
    p2 = 1.0 / (1.0 + math.exp(max(-700.0, min(rest - logits[entail], 700.0))))
    return {"p3": exp[entail] / sum(exp), "p2": p2,
            "label3": int(max(range(len(logits)), key=lambda i: logits[i]) == entail),
            "label2": int(logits[entail] >= rest)}
