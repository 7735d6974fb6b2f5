"""The settings of one leaderboard instance, stored in its database (`settings` table), and
reading and writing them."""
from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from leaderboard.evaluators.registry import load_evaluators
from leaderboard.service.db import Database, Setting
from leaderboard.service.model_source import resolve_source
from leaderboard.tracks import make_track
from leaderboard.tracks.summaries import SummariesEvaluator, default_summary_evaluators
from tasks.plumbing.errors import SumbenchError, check_choice
from tasks.plumbing.json_fields import JsonFields

SETTINGS_KEY = "instance"
#: bumped when the way a track's scores are computed or published changes (part of every
#: version key: entries wait for `rescore`, which answers them under the new rules). 2: a
#: participant's evaluated model is laddered on hidden gold, and the Ladder stays inside each
#: metric's range. 3: the public-gold copy check reads records as each task's metric does,
#: per task as well as pooled (leaderboard.tracks.usb.COPY_SHARES). 4: AUC tasks copy the
#: gold's order, and a near-copy of every task is flagged (leaderboard.tracks.gold_copies)
SCORER_VERSION = "4"


#: "public": participants may hold the test labels (the USB release is public); "private":
#: only the instance holds them
GOLD_VISIBILITIES = ("public", "private")
#: the settings of a public-gold instance: nothing hidden, so nothing to protect it with
PUBLIC_GOLD_SETTINGS = {"private_fraction": 0.0, "keep_linked": True, "ladder_step": 0.0}


#: what an instance created before these settings existed keeps on upgrade (migration 0004):
#: its boards were built on the full test sets with published per-item-derived detail
LEGACY_SETTINGS = {"private_fraction": 0.0, "keep_linked": True}


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and \
        math.isfinite(value)


def _default_evaluators() -> list[dict]:
    return [evaluator.to_dict() for evaluator in default_summary_evaluators()]


@dataclass(frozen=True)
class InstanceSettings(JsonFields):
    """Limits, ranking parameters and the summaries track's evaluators."""
    field_kind = "leaderboard setting(s)"
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
    quota_per_week: int = 50         # accepted submissions per user per 7 days (admins: none)
    ladder_step: float = 1.0         # the Ladder's step (x100 scale) for predictions files;
    #                                  0 turns the Ladder off
    private_fraction: float = 0.5    # test articles per task and domain kept private (scored,
    #                                  never published before `reveal`); 0 turns the split off
    keep_linked: bool = False        # host parts whose public inputs give another part's gold
    #                                  away on the same articles (else on disjoint articles)
    split_seed: int = 0              # seeds the private split and the linked parts' articles
    revealed: bool = False           # the private part's scores are published (`reveal`)
    gold_visibility: str = "private"  # "public": participants can hold the test labels (the
    #                                  USB release): the whole test set, no Ladder, and only
    #                                  entries the server computed are ranked
    max_model_bytes: int = 32 << 30  # a submitted model's files (and its base model's)
    max_model_files: int = 1000      # entries in a submitted model's folder
    evaluate_seconds: int = 6 * 3600  # wall-clock limit of one model's evaluation
    evaluate_memory_bytes: int = 64 << 30  # resident memory limit of an evaluation process
    rejected_per_hour: int = 30      # rejected submissions a user may send in an hour before
    #                                  the next are refused unread (429; admins: none)
    evaluations_per_user: int = 2    # a user's evaluations queued or running at once (admins:
    #                                  none; leaderboard.service.compute)
    evaluate_token_budget: int = 0   # generated tokens of one evaluation; 0: the board's test
    #                                  items x the release's max_new_tokens
    evaluate_base_seconds: int = 600  # an evaluation's wall-clock limit: this plus ...
    evaluate_seconds_per_token: float = 0.05  # ... this per budgeted token, at most
    #                                  evaluate_seconds
    summary_evaluators: tuple[Mapping[str, Any], ...] = field(
        default_factory=lambda: tuple(_default_evaluators()))

    def __post_init__(self) -> None:
        object.__setattr__(self, "summary_evaluators",
                           tuple(dict(item) for item in self.summary_evaluators))
        for name in ("n_resamples", "quota_per_day", "quota_per_week", "max_upload_bytes",
                     "max_records", "max_files", "max_line_bytes", "min_public_items",
                     "max_model_bytes", "max_model_files", "evaluate_seconds",
                     "evaluate_memory_bytes", "rejected_per_hour", "evaluations_per_user",
                     "evaluate_base_seconds"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise SumbenchError(f"setting {name} must be a positive integer, got {value!r}")
        for name in ("strict_lengths", "keep_linked", "revealed"):
            if not isinstance(getattr(self, name), bool):
                raise SumbenchError(f"setting {name} must be true or false, got "
                                    f"{getattr(self, name)!r}")
        if not isinstance(self.split_seed, int) or isinstance(self.split_seed, bool):
            raise SumbenchError(f"setting split_seed must be an integer, got "
                                f"{self.split_seed!r}")
        if self.gold_visibility not in GOLD_VISIBILITIES:
            raise SumbenchError(f"setting gold_visibility must be one of "
                                f"{', '.join(GOLD_VISIBILITIES)}, got {self.gold_visibility!r}")
        if self.gold_visibility == "public":
            self._check_public()
        if not (_is_number(self.private_fraction) and 0 <= self.private_fraction < 1):
            raise SumbenchError(f"setting private_fraction must be in [0, 1), got "
                                f"{self.private_fraction!r}")
        if not isinstance(self.evaluate_token_budget, int) or \
                isinstance(self.evaluate_token_budget, bool) or self.evaluate_token_budget < 0:
            raise SumbenchError(f"setting evaluate_token_budget must be a non-negative integer "
                                f"(0: the board's items x max_new_tokens), got "
                                f"{self.evaluate_token_budget!r}")
        if not (_is_number(self.evaluate_seconds_per_token)
                and 0 <= self.evaluate_seconds_per_token < math.inf):
            raise SumbenchError(f"setting evaluate_seconds_per_token must be a non-negative "
                                f"number, got {self.evaluate_seconds_per_token!r}")
        if not (_is_number(self.ladder_step) and 0 <= self.ladder_step <= 100):
            raise SumbenchError(f"setting ladder_step must be in [0, 100] (0: off), got "
                                f"{self.ladder_step!r}")
        if not (isinstance(self.alpha, (int, float)) and 0 < self.alpha < 1):
            raise SumbenchError(f"setting alpha must be in (0, 1), got {self.alpha!r}")
        if not (isinstance(self.lease_seconds, (int, float)) and math.isfinite(self.lease_seconds)
                and self.lease_seconds > 0):
            raise SumbenchError(f"setting lease_seconds must be positive, got "
                                f"{self.lease_seconds!r}")

    def _check_public(self) -> None:
        """Public gold hides nothing: the hosting and Ladder settings that protect hidden
        gold cannot be set."""
        for name, value in PUBLIC_GOLD_SETTINGS.items():
            if getattr(self, name) != value:
                raise SumbenchError(
                    f"setting {name} cannot be {getattr(self, name)!r} on a public-gold "
                    f"instance (it ranks on the whole test set, without a private part, "
                    f"hosting apart or the Ladder: {name} is {value!r} there)")

    @property
    def gold_is_public(self) -> bool:
        return self.gold_visibility == "public"

    def hosting(self) -> dict:
        """What decides which test items a board hosts and keeps private."""
        return {"private_fraction": self.private_fraction, "keep_linked": self.keep_linked,
                "split_seed": self.split_seed}

    def published(self) -> dict:
        """What decides what a board hosts and publishes (part of every version key: a
        change is a new version, and `rescore` answers every entry under it)."""
        return {**self.hosting(), "ladder_step": self.ladder_step,
                "min_public_items": self.min_public_items,
                **({"gold_visibility": "public"} if self.gold_is_public else {})}

    def to_dict(self) -> dict:
        return {**super().to_dict(),
                "summary_evaluators": [dict(item) for item in self.summary_evaluators]}

    def evaluators(self) -> list:
        return [SummariesEvaluator.from_dict(item) for item in self.summary_evaluators]

    def track(self, name: str, model_root: str | None = None):
        """The track called `name`, configured by these settings; with a worker's
        `model_root`, the models the summaries track's QuestEval columns name are found
        there (a folder under it) or on the hub (leaderboard.service.model_source)."""
        evaluators = self.evaluators() if name == "summaries" else None
        if evaluators and model_root is not None:
            evaluators = [column_models(evaluator, model_root) for evaluator in evaluators]
        return make_track(name, evaluators, self.strict_lengths)

    def with_changes(self, changes: Mapping[str, str]) -> InstanceSettings:
        """A copy with `KEY=VALUE` strings applied (values parsed as JSON when possible)."""
        values = self.to_dict()
        for key, text in changes.items():
            check_choice(key, sorted(values), "leaderboard setting")
            try:
                values[key] = json.loads(text)
            except json.JSONDecodeError:
                values[key] = text
        return InstanceSettings.from_dict(values)


def column_models(evaluator: SummariesEvaluator, model_root: str) -> SummariesEvaluator:
    """An evaluator column with each model it names (the evaluator's `model_options`) as a
    folder under `model_root` (its absolute path) or a hub id; a DataError names a model
    that is neither."""
    if not evaluator.of_evaluator:
        return evaluator
    options = dict(evaluator.options)
    for name in load_evaluators().get(evaluator.presence).model_options:
        if name in options:
            source = resolve_source(str(options[name]), model_root)
            options[name] = str(Path(model_root, source.name).resolve()) \
                if source.kind == "folder" else source.name
    return dataclasses.replace(evaluator, options=tuple(options.items()))


def load_settings(database: Database, session=None) -> InstanceSettings:
    """The instance settings, read in `session` when given, else in a transaction of its own."""
    if session is None:
        with database.session() as own:
            return load_settings(database, own)
    row = session.get(Setting, SETTINGS_KEY)
    return InstanceSettings() if row is None else \
        InstanceSettings.from_dict(json.loads(row.value))


def save_settings(database: Database, settings: InstanceSettings) -> None:
    with database.write_session() as session:
        row = session.get(Setting, SETTINGS_KEY)
        text = json.dumps(settings.to_dict(), sort_keys=True)
        if row is None:
            session.add(Setting(key=SETTINGS_KEY, value=text))
        else:
            row.value = text
