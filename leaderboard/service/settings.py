"""The settings of one leaderboard instance, stored in its database (`settings` table)."""
from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
from typing import Any, Mapping

from tasks.errors import SumbenchError

SETTINGS_KEY = "instance"
#: bumped when the way a track's scores are computed changes (part of every version key)
SCORER_VERSION = "1"


def _default_evaluators() -> list[dict]:
    from leaderboard.tracks.summaries import default_summary_evaluators

    return [evaluator.to_dict() for evaluator in default_summary_evaluators()]


@dataclass(frozen=True)
class InstanceSettings:
    """Limits, ranking parameters and the summaries track's evaluators."""
    n_resamples: int = 1000          # bootstrap resamples for intervals, tests and bands
    seed: int = 0                    # seed of the resample indices (shared by all entries)
    alpha: float = 0.05              # significance level of the paired tests (rank bands)
    quota_per_day: int = 20          # accepted submissions per user per 24 h (admins: none)
    max_upload_bytes: int = 64 << 20  # request body limit
    max_records: int = 500_000       # JSON lines in one submission
    max_files: int = 64              # files in one submission (archive members included)
    max_line_bytes: int = 1 << 20    # bytes of one JSON line (scoring a huge prediction
    #                                  would take memory far beyond its size)
    lease_seconds: float = 300.0     # a claimed job is re-claimed after this without a beat
    min_public_items: int = 10       # fewest test items behind a published interval or
    #                                  per-domain score (fewer would expose per-item results)
    strict_lengths: bool = True      # refuse probability lists of another length than the
    #                                  item's (else score them as the official evaluation does)
    summary_evaluators: tuple[Mapping[str, Any], ...] = field(
        default_factory=lambda: tuple(_default_evaluators()))

    def __post_init__(self) -> None:
        object.__setattr__(self, "summary_evaluators",
                           tuple(dict(item) for item in self.summary_evaluators))
        for name in ("n_resamples", "quota_per_day", "max_upload_bytes", "max_records",
                     "max_files", "max_line_bytes", "min_public_items"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise SumbenchError(f"setting {name} must be a positive integer, got {value!r}")
        if not isinstance(self.strict_lengths, bool):
            raise SumbenchError(f"setting strict_lengths must be true or false, got "
                                f"{self.strict_lengths!r}")
        if not (isinstance(self.alpha, (int, float)) and 0 < self.alpha < 1):
            raise SumbenchError(f"setting alpha must be in (0, 1), got {self.alpha!r}")
        if not (isinstance(self.lease_seconds, (int, float)) and math.isfinite(self.lease_seconds)
                and self.lease_seconds > 0):
            raise SumbenchError(f"setting lease_seconds must be positive, got "
                                f"{self.lease_seconds!r}")

    def to_dict(self) -> dict:
        data = dataclasses.asdict(self)
        data["summary_evaluators"] = [dict(item) for item in self.summary_evaluators]
        return data

    @classmethod
    def from_dict(cls, data: Mapping) -> "InstanceSettings":
        known = {item.name for item in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise SumbenchError(f"unknown leaderboard setting(s): {', '.join(unknown)}")
        return cls(**data)

    def evaluators(self) -> list:
        from leaderboard.tracks.summaries import SummariesEvaluator

        return [SummariesEvaluator.from_dict(item) for item in self.summary_evaluators]

    def track(self, name: str):
        """The track called `name`, configured by these settings."""
        from leaderboard.tracks import make_track

        return make_track(name, self.evaluators() if name == "summaries" else None,
                          self.strict_lengths)

    def with_changes(self, changes: Mapping[str, str]) -> "InstanceSettings":
        """A copy with `KEY=VALUE` strings applied (values parsed as JSON when possible)."""
        values = self.to_dict()
        for key, text in changes.items():
            if key not in values:
                raise SumbenchError(f"unknown leaderboard setting {key!r} (known: "
                                    f"{', '.join(sorted(values))})")
            try:
                values[key] = json.loads(text)
            except json.JSONDecodeError:
                values[key] = text
        return InstanceSettings.from_dict(values)
