"""QAPyramid from human presence judgments, and the annotators' agreement.

- A QA pair is present in a summary when a strict majority of its votes say 1 (a tie, e.g.
  1 of 2 or 2 of 4, counts as not present; a single vote decides alone). QAPyramid's
  release has no code for ties; `ties_present=True` counts them as present instead (GPT4
  then scores 0.555 rather than 0.548 on the released judgments).
- QAPyramid of a summary = present QAs / all QAs of its example (over every predicate).
- A system's score = the mean over its examples.
- Agreement: Krippendorff's alpha (nominal) over every QA judgment with at least two votes; a
  unit is one (system, example, predicate, QA) and its values are the votes.
"""
from __future__ import annotations

import collections
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from tasks.metrics.agreement import krippendorff_alpha_nominal
from tasks.qapyramid.judgments import QAJudgment, QAJudgments


def majority_vote(values: Sequence[int], ties_present: bool = False) -> int:
    """1 when more than half of the 0/1 votes are 1, else 0 (ties -> 0, or 1 with
    `ties_present`)."""
    ones, total = 2 * sum(values), len(values)
    return int(ones > total or (ties_present and ones == total))


def summary_scores(judgments: Iterable[QAJudgment], ties_present: bool = False
                   ) -> dict[str, dict[str, float]]:
    """{system: {example_id: present QAs / all QAs}} in file order."""
    counts: dict[str, dict[str, list[int]]] = collections.defaultdict(dict)
    for item in judgments:
        present_total = counts[item.system].setdefault(item.example_id, [0, 0])
        present_total[0] += majority_vote(item.values, ties_present)
        present_total[1] += 1
    return {system: {example: present / total for example, (present, total) in examples.items()}
            for system, examples in counts.items()}


def system_scores(per_summary: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
    """{system: mean over its examples}."""
    return {system: float(np.mean(list(scores.values())))
            for system, scores in per_summary.items()}


def uneven_coverage(per_example: Mapping[str, Mapping[str, object]]) -> str | None:
    """A note when the systems are not scored on the same examples (their means then average
    different summaries and do not compare), naming the first system and example apart;
    None when every system has every example."""
    every = set().union(*map(set, per_example.values())) if per_example else set()
    short = {system: sorted(every - set(rows)) for system, rows in per_example.items()
             if len(rows) < len(every)}
    if not short:
        return None
    system = next(iter(short))
    return (f"the systems are not scored on the same examples: {len(short)} of "
            f"{len(per_example)} lack some of the {len(every)} examples (first: {system!r} "
            f"lacks {len(short[system])}, e.g. {short[system][0]!r}); their means average "
            f"different summaries")


def agreement_units(judgments: Iterable[QAJudgment]) -> list[tuple[int, ...]]:
    """The votes of every QA judgment with at least two votes (the alpha units)."""
    return [item.values for item in judgments if len(item.values) >= 2]


def human_qapyramid(judgments: QAJudgments, ties_present: bool = False) -> dict:
    """The human QAPyramid report: system scores, per-example scores and agreement."""
    per_summary = summary_scores(judgments, ties_present)
    units = agreement_units(judgments)
    vote_counts = collections.Counter(len(item.votes) for item in judgments)
    return {
        "systems": system_scores(per_summary),
        "krippendorff_alpha": krippendorff_alpha_nominal(units),
        "n_units": len(units),
        "n_qa_items": len(judgments),
        "n_examples": {system: len(scores) for system, scores in per_summary.items()},
        "votes_per_item": {str(k): vote_counts[k] for k in sorted(vote_counts)},
        "ties": "present" if ties_present else "absent",
        "per_example": per_summary,
    }
