"""What a predictions-file submission learns of its scores: the Ladder (Blum & Hardt, ICML 2015).

A score computed on hidden test items is an oracle for their labels: a crafted file asks a
question and the answer tells (leaderboard-lessons: Kaggle, KiTS19). So for a predictions file
of a user who is not an admin, each part's public headline h is *released* only when it beats
that user's best released value b on the board (same version) by more than the part's step s:
the answer is then h rounded to s (and becomes b); otherwise it is "no improvement" (b stays,
and the entry shows b, as the Ladder does). Entries the server computed itself (evaluated
models, baselines) and admins' are not laddered.

A part's step is `ladder_step`, but never finer than the sampling noise of its n public items,
100/sqrt(n): a difference below it says nothing about a model, only about items. A part with
fewer than `min_public_items` public items releases nothing to a laddered entry.

What one answer can reveal, per part: whether h > b + s (one bit), and when it is, h to within
s/2: at most log2(100/s + 1) bits more. Since every release raises b by more than s, one user
gets at most 100/s releases per part and board, whatever the quota; the other answers are
"no improvement", one bit each. The quota bounds the bits of a week: quota_per_week x (1 +
log2(100/s + 1)) per part at the very most, and far fewer in practice (a release needs a real
improvement).
"""
from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence

from sqlalchemy import select

from leaderboard.service.db import Score, Submission

NO_IMPROVEMENT = "no improvement"


def part_step(ladder_step: float, n_public: int) -> float:
    """The part's step: `ladder_step`, never finer than 100/sqrt(n_public)."""
    return max(float(ladder_step), 100.0 / math.sqrt(max(n_public, 1)))


def rounded(value: float, step: float, bounds: Sequence[float] | None = None) -> float:
    """`value` to the nearest multiple of `step`, kept inside the metric's `bounds` (a
    multiple past 100 is never published: the bound is)."""
    value = round(round(value / step) * step, 6)
    return value if bounds is None else min(max(value, bounds[0]), bounds[1])


def user_bests(session, user_id: int, track: str, board: str, version_key: str,
               before: int | None = None) -> dict[str, float]:
    """part -> the best value released to the user on the board under this version, by the
    user's submissions before submission `before` (the Ladder answers in submission order,
    also when a rescore answers them again; hidden and deleted entries count: hiding a probe
    or deleting it does not reset the Ladder)."""
    query = select(Score.released).join(Submission, Submission.id == Score.submission_id).where(
        Submission.user_id == user_id, Submission.track == track, Submission.board == board,
        Score.version_key == version_key, Score.released.is_not(None))
    if before is not None:
        query = query.where(Submission.id < before)
    bests: dict[str, float] = {}
    for text in session.scalars(query):
        for part, answer in json.loads(text).items():
            value = answer.get("value")
            if value is not None and (part not in bests or value > bests[part]):
                bests[part] = value
    return bests


def ladder_answers(headlines: Mapping[str, float | None], n_public: Mapping[str, int],
                   bests: Mapping[str, float], ladder_step: float, min_items: int,
                   bounds: Mapping[str, Sequence[float]] | None = None) -> dict[str, dict]:
    """part -> {"value", "improved", "step", "range"[, "note"]}: what the Ladder releases of
    these public headlines, given the user's bests; a released value stays in its part's
    metric range (`bounds`: part -> [low, high])."""
    answers = {}
    for part, headline in sorted(headlines.items()):
        step = round(part_step(ladder_step, n_public.get(part, 0)), 6)
        best, limits = bests.get(part), (bounds or {}).get(part)
        common = {"step": step, **({"range": list(limits)} if limits else {})}
        if n_public.get(part, 0) < min_items:
            answers[part] = {"value": None, "improved": False, **common,
                             "note": f"withheld: fewer than {min_items} public test items"}
        elif headline is not None and (best is None or headline > best + step):
            answers[part] = {"value": rounded(headline, step, limits), "improved": True,
                             **common}
        else:
            kept = best if best is None or limits is None else \
                min(max(best, limits[0]), limits[1])
            answers[part] = {"value": kept, "improved": False, **common,
                             "note": NO_IMPROVEMENT}
    return answers


def released_headlines(released: Mapping[str, dict]) -> dict[str, float | None]:
    """What a laddered entry shows and ranks by: each part's released value."""
    return {part: answer.get("value") for part, answer in released.items()}
