"""What a leaderboard track is: gold parts, a public manifest, a validator, a scorer.

A track's boards (e.g. USB variants) each have *parts* (tasks, or datasets) that a complete
entry covers. Gold lives server-side as JSON payloads per (board, part); what a submitter may
see of it is the *manifest* (item keys and expected prediction shapes, never a reference, a
label or a per-example score). The same `check` runs in `sumbench leaderboard submit --check`
(with a manifest fetched from the server) and on the server; `score` joins the checked
predictions onto the hidden gold and returns, per part, the public result, the headline and the
private per-example material that bootstrap intervals and paired tests resample.
"""
from __future__ import annotations

import abc
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from leaderboard.ranking import band_rule, bootstrap_distribution
from tasks.plumbing.errors import DataError
from tasks.validation import MAX_INDEX, is_int, require_index, require_str

#: (path, 1-based line, record) of a submitted JSON line
Located = tuple[str, int, dict]
#: board -> part -> gold payload (plain JSON data)
GoldSet = Mapping[str, Mapping[str, dict]]
#: at most this many errors are reported for one rejected submission
MAX_ERRORS = 20


@dataclass(frozen=True)
class PartScore:
    """One part of a scored entry: public `result`, `headline` (x100, None when undefined)
    and the private per-example `material` (gold order)."""
    result: dict
    headline: float | None
    material: list


class SubmissionErrors(DataError):
    """Every problem found in a submission (at most MAX_ERRORS), each a DataError."""

    def __init__(self, errors: Sequence[DataError], more: int = 0):
        self.errors, self.more = list(errors), more
        first = str(self.errors[0]) if self.errors else "invalid submission"
        extra = len(self.errors) - 1 + more
        super().__init__(first + (f" (and {extra} more problem(s))" if extra else ""))

    def to_list(self) -> list[dict]:
        return [{"file": error.path, "line": error.line, "field": error.field,
                 "message": error.reason} for error in self.errors]


class ErrorCollector:
    """Collects DataErrors up to MAX_ERRORS; `raise_if_any` raises them together."""

    def __init__(self) -> None:
        self.errors: list[DataError] = []
        self.more = 0

    def add(self, message: str, *, path: str | None = None, line: int | None = None,
            field: str | None = None) -> None:
        self.add_error(DataError(message, path=path, line=line, field=field))

    def add_error(self, error: DataError) -> None:
        if len(self.errors) < MAX_ERRORS:
            self.errors.append(error)
        else:
            self.more += 1

    @property
    def full(self) -> bool:
        """Whether a further problem is only counted (its message would not be shown): the
        hot paths then skip building it."""
        return len(self.errors) >= MAX_ERRORS

    def raise_if_any(self) -> None:
        if self.errors:
            raise SubmissionErrors(self.errors, self.more)


class Track(abc.ABC):
    """One leaderboard track. Stateless: gold and manifests are passed in."""

    name: ClassVar[str]
    title: ClassVar[str]
    description: ClassVar[str]
    #: what a part is called on pages ("task", "dataset")
    part_kind: ClassVar[str] = "task"
    #: the fields a submitted JSON line needs
    submission_fields: ClassVar[tuple[str, ...]] = ()
    #: bump when scoring changes results (part of every score row's version)
    version: ClassVar[str] = "1"
    #: the range every part's headline lies in (x100 scale)
    headline_bounds: ClassVar[tuple[float, float]] = (0.0, 100.0)
    #: how the boards' rank bands are formed (leaderboard.ranking.rank_entries)
    band_method: ClassVar[str] = "adjacent"

    @abc.abstractmethod
    def load_gold(self, source: str) -> dict[str, dict[str, dict]]:
        """board -> part -> gold payload, read from a folder given at `leaderboard init`."""

    def hosted(self, gold: GoldSet, hosting) -> tuple[dict[str, dict[str, dict]], list]:
        """(board -> part -> hosted payload, linked parts found): what the boards host of the
        stored gold under the instance's `hosting` (leaderboard.tracks.hosting). By default
        everything, published (no private items) and without links."""
        return ({board: {part: {**payload, "private": []} for part, payload in parts.items()}
                 for board, parts in gold.items()}, [])

    def inputs(self, gold: GoldSet, board: str) -> dict[str, list[dict]]:
        """part -> the public inputs a submission answers (no gold field), for participants
        who hold no copy of the test data."""
        raise NotImplementedError(f"track {self.name} publishes no inputs")

    def apart(self, stored: GoldSet, hosted: GoldSet, board: str) -> dict[str, list[str]]:
        """part -> the articles of the board's stored items that it does not host."""
        return {}

    def subset_result(self, part: str, material: Sequence) -> dict:
        """The part's public result (headline included) of a subset of its items' material:
        what scoring only those items gives. Tracks whose `hosted` keeps items private must
        give it."""
        raise NotImplementedError(f"track {self.name} keeps no item private")

    def boards(self, gold: GoldSet) -> list[str]:
        return sorted(gold)

    def parts(self, gold: GoldSet, board: str) -> list[str]:
        return sorted(gold.get(board, {}))

    @abc.abstractmethod
    def manifest(self, gold: GoldSet, board: str) -> dict:
        """Public: {"track", "board", "parts": {part: [item descriptions]}}."""

    @abc.abstractmethod
    def manifest_from_records(self, located: Sequence[Located], board: str) -> dict:
        """A manifest that accepts exactly the items the records name (each once): checking
        against it checks the shape of a submission without the server's manifest."""

    @abc.abstractmethod
    def check(self, located: Iterable[Located], manifest: Mapping) -> dict[str, list[dict]]:
        """Validate submitted lines against a manifest: part -> minimal records in manifest
        order. Raises SubmissionErrors (file, line, field of each problem)."""

    @abc.abstractmethod
    def score(self, checked: Mapping[str, Sequence[dict]], gold: GoldSet,
              board: str) -> dict[str, PartScore]:
        """Join checked records onto the hidden gold and score every part."""

    @abc.abstractmethod
    def statistic(self, part: str, gold: GoldSet, board: str):
        """The part's headline from a sample of its material (leaderboard.ranking.Statistic)."""

    def distribution(self, part: str, gold: GoldSet, board: str, material: Sequence, *,
                     n_resamples: int, seed: int):
        """An entry's bootstrap distribution of the part's headline, drawn alike for every
        entry of the board (so that two entries' distributions are paired): by default
        `statistic` on resamples of the material's items."""
        return bootstrap_distribution(material, self.statistic(part, gold, board),
                                      n_resamples=n_resamples, seed=seed)

    def band_rule(self, n_resamples: int, alpha: float, seed: int) -> str:
        """What the boards' pages say of their rank bands."""
        return band_rule(n_resamples, alpha, seed)

    def headline_name(self, part: str) -> str:
        return "headline"

    def headline_range(self, part: str) -> tuple[float, float]:
        """The range the part's headline lies in: no published number leaves it."""
        return self.headline_bounds

    def breakdown(self, checked: Mapping[str, Sequence[dict]], gold: GoldSet, board: str,
                  materials: Mapping[str, Sequence] | None = None) -> dict | None:
        """Extra public detail of an entry (e.g. per-domain scores); None when there is none.
        `materials`: part -> the per-record material `score` gave on this gold, when known."""
        return None

    def describe_part(self, part: str) -> str:
        return part

    def part_title(self, part: str) -> str:
        """How pages head the part's column ("Factuality (AUC)")."""
        return part

    def part_help(self, part: str) -> str:
        """The part's headline metric and what it measures (a column's tooltip)."""
        return f"{part}: {self.headline_name(part)} x100"

    def gold_match(self, checked: Mapping[str, Sequence[dict]], gold: GoldSet, board: str,
                   headlines: Mapping[str, float | None] | None = None) -> dict | None:
        """How many of the submitted records copy the gold answer exactly, per part (as
        `gold_match_summary` reads them); None when the track cannot tell. `headlines`: the
        parts' headlines on this gold, when already scored."""
        return None


#: an entry "matches the public gold" when, pooled over every part it answers, at least
#: MATCH_SHARE of its records are the gold answer as each part's metric sees it and it answers
#: a text part, or at least MATCH_SHARE_LABELS of them when it answers label parts only (where
#: a very good classifier's decisions come close); or when any one part reaches its own
#: share (`copy_shares`; these two by default: text, labels). A model's own outputs stay
#: below (the shared fixture's sample predictions: 43% pooled, no part at its share); a copy
#: keeps it with a few records changed, rounded or perturbed in what the metric ignores.
MATCH_SHARE, MATCH_SHARE_LABELS = 0.85, 0.99


def gold_match_summary(counts: Mapping[str, tuple[int, int, bool]],
                       copy_shares: Mapping[str, float] | None = None,
                       order_copies: Sequence[str] = (), near: bool = False) -> dict:
    """{"matches_public_gold", "share" (pooled), "parts": {part: share}, "copied_parts"
    (those at their own share, and the order copies), "text_copies" (those of them whose
    answers are text: memorised references), "order_copies" (AUC parts whose answers order
    the gold's labels), "near_copy" (headlines no model reaches, pooled), "copy_shares"}
    from part -> (records that are the gold answer, records, whether the part's answers are
    text)."""
    total = sum(records for _, records, _ in counts.values())
    copied = sum(same for same, _, _ in counts.values())
    share = copied / total if total else None
    needed = MATCH_SHARE if any(text for _, _, text in counts.values()) else MATCH_SHARE_LABELS
    shares = {part: (copy_shares or {}).get(part, MATCH_SHARE if text else MATCH_SHARE_LABELS)
              for part, (_, _, text) in counts.items()}
    copied_parts = sorted({part for part, (same, records, _) in counts.items()
                           if records and same / records >= shares[part]} | set(order_copies))
    return {"matches_public_gold": bool(copied_parts) or near
            or (share is not None and share >= needed),
            "share": None if share is None else round(share, 4),
            "parts": {part: round(same / records, 4)
                      for part, (same, records, _) in counts.items() if records},
            "copied_parts": copied_parts,
            "text_copies": [part for part in copied_parts if counts[part][2]],
            "order_copies": sorted(order_copies), "near_copy": near,
            "copy_shares": shares}


def copy_reason(gold_match: Mapping[str, Any] | None) -> str | None:
    """Why an entry evaluated on a public-gold board copies its gold beyond what a model can
    reach (memorised references, the labels' order, a near-copy of every part), or None:
    decisions equal to the gold's alone could be a perfect classifier's (flagged, ranked)."""
    copies = text_copies(gold_match)
    if copies:
        return (f"its outputs reproduce the public references of {', '.join(copies)} "
                f"(memorised test data)")
    order = list((gold_match or {}).get("order_copies", []))
    if order:
        return (f"its scores of {', '.join(order)} put the public gold's labels in order "
                f"(AUC 100: a transform of the test gold)")
    if (gold_match or {}).get("near_copy"):
        return ("its answers come within a little of the public gold on every part it "
                "answers (headlines no model reaches: a near-copy of the test gold)")
    return None


def text_copies(gold_match: Mapping[str, Any] | None) -> list[str]:
    """The text parts whose answers reproduce the public references (an entry scored before
    per-part shares existed: every part, when it matched the public gold)."""
    if not gold_match:
        return []
    if "text_copies" not in gold_match:
        return sorted(gold_match.get("parts", {})) if gold_match.get("matches_public_gold") \
            else []
    return list(gold_match["text_copies"])


def check_id_types(collector: ErrorCollector, located: Located,
                   fields: Sequence[str]) -> bool:
    """Whether the id fields can name an item (strings; summ_idx a non-negative integer, as
    `sumbench score` requires); an error for the first that cannot."""
    path, line, record = located
    if ids_readable(record, fields):
        return True
    if collector.full:  # counted only: no message is built for it
        collector.more += 1
        return False
    for field in fields:
        try:
            require_index(record, field) if field == "summ_idx" else require_str(record, field)
        except DataError as error:
            collector.add_error(error.located(path, line))
            return False
    return True  # (the require checks decide; tests keep ids_readable in step with them)


def ids_readable(record: Mapping, fields: Sequence[str]) -> bool:
    """`check_id_types` without an error: each id field a string, `summ_idx` a non-negative
    integer up to MAX_INDEX (tasks.validation's require_str and require_index, raising
    nothing)."""
    return all(is_int(value := record.get(field)) and 0 <= value <= MAX_INDEX
               if field == "summ_idx" else isinstance(record.get(field), str)
               for field in fields)


def duplicate_error(collector: ErrorCollector, key_text: str, path: str, line: int,
                    first: tuple[str, int]) -> None:
    collector.add(f"duplicate record ({key_text}), first seen at {first[0]}:{first[1]}",
                  path=path, line=line, field="id")


def check_item(collector: ErrorCollector, located: Located,
               seen: dict[tuple, tuple[str, int]], key: tuple, known: Mapping[tuple, Any],
               describe: Callable[[], str]) -> bool:
    """Record `key` as seen; False (with an error naming the item, `describe()`) when it is
    unknown or a duplicate."""
    path, line, _ = located
    if (key not in known or key in seen) and collector.full:  # counted only
        collector.more += 1
        return False
    if key not in known:
        collector.add(f"no such test item ({describe()})", path=path, line=line, field="id")
        return False
    if key in seen:
        duplicate_error(collector, describe(), path, line, seen[key])
        return False
    seen[key] = (path, line)
    return True


def unplaced_count(keys: Sequence[tuple | None], seen: Mapping[tuple, Any]) -> int:
    """How many rejected records may be among a part's missing items: those whose ids name no
    item (None) or an item no accepted record gave (a duplicate of a given item cannot)."""
    return sum(key is None or key not in seen for key in keys)


def report_missing(collector: ErrorCollector, part: str, expected: Sequence[tuple],
                   seen: Mapping[tuple, Any], describe, unplaced: int = 0) -> None:
    """An error for a part whose submitted items do not cover every expected item;
    `unplaced`: the part's records rejected (errors above) before they named an item, which
    may be the missing ones (e.g. a record with a bad summ_idx)."""
    missing = [key for key in expected if key not in seen]
    if missing:
        among = (f"; {unplaced} rejected record{'s' if unplaced != 1 else ''} of this part "
                 f"above may be among them") if unplaced else ""
        collector.add(f"{part}: {len(missing)} of {len(expected)} test items missing "
                      f"(first: {describe(missing[0])}){among}", field="id")
