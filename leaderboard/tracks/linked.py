"""Which USB parts give another part's gold away through their public inputs.

The eight USB tasks are derived from the same annotated summaries (shared/docs/usb-format.md,
section 2), so on one article a task's inputs can hold another task's answer: FIX's
`initial_summary` is the unsupported claim of a FAC pair (its label), the pair's other claim is
FIX's reference, EVEXT's claims are the summary sentences (ABS, COMP and TOPIC references, the
supported FAC claims), COMP's inputs are the evidence lines (EXT and EVEXT labels), ...

`find_links` checks this on the gold itself rather than trusting a list: every text a part
publishes and that was *selected* by the annotation (below) is compared, whitespace removed,
with what reveals each item of every other part on the same article. Texts a part publishes
whole (an article's every line: ABS, EXT, TOPIC inputs) single nothing out and are not used.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping

from leaderboard.tracks.hosting import Link

#: fields of a task's public inputs whose texts the annotation selected (a summary sentence,
#: the evidence lines of one sentence): another part's gold may be among them
SELECTED_FIELDS = {
    "multisentence_compression": ("input_lines",),
    "evidence_extraction": ("claim",),
    "factuality_classification": ("summary_sent", "input_lines"),
    "fixing_factuality": ("initial_summary", "input_lines"),
    "unsupported_span_prediction": ("summary", "input_lines"),
}
SPAN = re.compile(r"\[\].*?(\[/\]|$)", re.S)


def squeezed(text: str) -> str:
    """The text without whitespace: tokenised and plain forms of a sentence compare equal."""
    return "".join(text.split())


def public_texts(task: str, template: Mapping) -> set[str]:
    texts: set[str] = set()
    for field in SELECTED_FIELDS.get(task, ()):
        value = template.get(field)
        for text in ([value] if isinstance(value, str) else value or []):
            texts.add(squeezed(text))
    return texts


def _any_in(texts: Iterable[str], public: set[str]) -> bool:
    return any(squeezed(text) in public for text in texts)


def _lines_singled_out(template: Mapping, positive: Callable[[int], bool],
                       public: set[str]) -> bool:
    """A line-labelling item is given away when the public texts hold some of its positive
    lines and none of its negative ones (they single the positives out)."""
    lines = [squeezed(line) for line in template["input_lines"]]
    chosen = [index for index, line in enumerate(lines) if line in public]
    return bool(chosen) and all(positive(index) for index in chosen)


def _reveals_unsup(template: Mapping, public: set[str]) -> bool:
    """UNSUP's answer follows from the sentence as it should read: the summary with its marked
    spans removed."""
    return squeezed(SPAN.sub("", template["annotated_summary"])) in public


#: task -> whether the public texts of another part on the item's article give its gold away
REVEALED_BY: dict[str, Callable[[Mapping, set[str]], bool]] = {
    "abstractive_summarization": lambda t, public: _any_in(t["output_lines"], public),
    "topicbased_summarization": lambda t, public: _any_in(t["output_lines"], public),
    "multisentence_compression": lambda t, public: _any_in(t["output_lines"], public),
    "fixing_factuality": lambda t, public: _any_in([t["fixed_summary"]], public),
    "factuality_classification": lambda t, public: _any_in([t["summary_sent"]], public),
    "unsupported_span_prediction": _reveals_unsup,
    "extractive_summarization": lambda t, public: _lines_singled_out(
        t, lambda index: bool(t["labels"][index]), public),
    "evidence_extraction": lambda t, public: _lines_singled_out(
        t, lambda index: index in set(t["labels"]), public),
}


def find_links(board: str, parts: Mapping[str, Mapping]) -> list[Link]:
    """Every (revealer, victim) pair of a board's parts with at least one victim item whose
    gold the revealer's public inputs on the same article give away."""
    public: dict[str, dict[str, set[str]]] = {}
    for part, payload in parts.items():
        for template in payload["templates"]:
            public.setdefault(part, {}).setdefault(template["id"], set()).update(
                public_texts(part, template))
    links = []
    for victim, payload in sorted(parts.items()):
        revealed_by = REVEALED_BY.get(victim)
        if revealed_by is None:
            continue
        for revealer in sorted(parts):
            if revealer == victim or revealer not in SELECTED_FIELDS:
                continue
            texts = public.get(revealer, {})
            count = sum(revealed_by(template, texts.get(template["id"], set()))
                        for template in payload["templates"])
            if count:
                links.append(Link(board, revealer, victim, count, len(payload["templates"])))
    return links
