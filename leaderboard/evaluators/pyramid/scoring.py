"""Pyramid scores from units and a presence backend.

A presence backend is any callable `presence(summaries, units) -> presences` where
`summaries[i]` is a summary, `units[i]` the reference units of its example, and
`presences[i][j]` in [0, 1] the presence of unit j in summary i. The Pyramid score of a summary is
the unweighted mean presence over its units; a system's score is the mean over examples.

Backends are reached by name through `presence_factory(name)`, which gives a factory
`factory(dataset, system, units_kind, **options) -> presence` for each name of
`backend_names()`: "human", and the one registry of backends
(leaderboard.evaluators.pyramid.presence.PRESENCE_BACKENDS, built-in or of installed packages):
- "human": the human SCU labels of the dataset (SCUs only, no options);
- "lexical": `leaderboard.evaluators.pyramid.presence.LexicalBackend` (present iff the unit's
  content token recall >= threshold). `threshold` defaults to `lexical_threshold(dataset.root)`: the
  F1-maximising threshold on the human SCU labels of the folder's train split (every labelled
  system; examples split by id as in the presence_detection task, 60/20/20), whatever the units
  scored or the systems chosen; a folder without labels needs an explicit threshold.
  `lexical_calibration` says which examples it was fitted on: scoring them (the default scores every
  example) and meta-evaluating against their human labels is not held out; `dataset_split(dataset,
  "test")` keeps only held-out examples;
- "nli", "seq2seq", "causal-lm" (zero-shot), "chat" (zero-shot): the automatic backends of
  leaderboard.evaluators.pyramid.presence, imported on first use (so "human" never imports
  torch); one backend (one model) is built per options and reused across systems.
`BACKEND_OPTIONS` says which options each built-in backend needs and takes (and with which
units); `check_presence_options` enforces it. A package adds a backend through a
`sumbench.presence_backends` entry point (tasks.plumbing.plugins); it checks its own options.
"""
from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from leaderboard.evaluators.pyramid.lite_pyramid import weighted_pyramid_score
from leaderboard.evaluators.pyramid.presence import (
    LexicalBackend,
    plugin_backend_names,
    pyramid_factory,
)
from tasks.plumbing.errors import SumbenchError, check_choice
from tasks.plumbing.kept import Kept
from tasks.qapyramid.dataset import DEFAULT_SPLIT_SEED, check_split, in_split
from tasks.qapyramid.presence_detection import pyramid_instances
from tasks.qapyramid.pyramid_data import UNIT_KINDS, PyramidDataset, load_pyramid_dataset

#: unit kinds a text-judging backend accepts: the folder's, a mix by example and unit files
MODEL_UNIT_KINDS = UNIT_KINDS + ("mix-by-example", "file")

Presence = Callable[[list[str], list[list[str]]], list[list[float]]]
PresenceFactory = Callable[..., Presence]

#: the backend that reads the dataset's human labels instead of judging summary text
HUMAN = "human"
#: option name -> the `sumbench pyramid` flag that sets it (for messages)
OPTION_FLAGS = {"model": "--model", "threshold": "--threshold", "mode": "--nli-mode",
                "batch_size": "--batch-size", "device": "--device",
                "cache": "--cache",
                "entailment_label": "--entailment-label", "max_length": "--nli-max-length",
                "base_model": "--alignscore-base", "claim_sentences": "--claim-sentences"}
MODEL_OPTIONS = ("model", "batch_size", "device", "cache")


@dataclass(frozen=True)
class BackendOptions:
    """The options a built-in backend needs and takes, and the unit kinds it works with."""
    required: tuple[str, ...] = ()
    accepted: tuple[str, ...] = ()
    units: tuple[str, ...] = MODEL_UNIT_KINDS
    #: why `units` is limited / what the required model is (for error messages)
    units_reason: str = ""
    model_help: str = ""
    #: whether it reads the dataset's human labels (rather than judging the summary text)
    human_labels: bool = False


BACKEND_OPTIONS: dict[str, BackendOptions] = {
    "human": BackendOptions(units=("scus",), units_reason="human labels exist only for SCUs",
                            human_labels=True),
    "lexical": BackendOptions(accepted=("threshold",)),
    "nli": BackendOptions(("model",), MODEL_OPTIONS + ("mode", "entailment_label",
                                                       "max_length"),
                          model_help="an NLI sequence classifier: a folder or hub id"),
    "seq2seq": BackendOptions(("model",), MODEL_OPTIONS,
                              model_help="a seq2seq model trained on presence_detection"),
    "causal-lm": BackendOptions(("model",), MODEL_OPTIONS,
                                model_help="a causal LM: a folder or hub id"),
    "chat": BackendOptions(("model",), ("model", "cache"),
                           model_help="the model name served at OPENAI_BASE_URL"),
    "minicheck": BackendOptions(("model",), MODEL_OPTIONS + ("max_length",),
                                model_help="a MiniCheck checkpoint (lytang/MiniCheck-RoBERTa-"
                                           "Large, -DeBERTa-v3-Large, -Flan-T5-Large): a "
                                           "folder or hub id"),
    "alignscore": BackendOptions(("model",), MODEL_OPTIONS + ("base_model", "claim_sentences"),
                                 model_help="an AlignScore Lightning checkpoint (.ckpt, e.g. "
                                            "AlignScore-large.ckpt)"),
    "minicheck-chat": BackendOptions((), ("model", "cache"),
                                     model_help="Bespoke-MiniCheck-7B's name at "
                                                "OPENAI_BASE_URL"),
}


@dataclass(frozen=True)
class PyramidResult:
    """One system's Pyramid evaluation: per-example scores and their mean; `presence`
    describes the backend that judged the units (`describe_presence`; not compared)."""
    system: str
    per_example: tuple[float, ...]
    presence: Mapping[str, Any] = field(default_factory=dict, compare=False)

    @property
    def score(self) -> float:
        import numpy as np

        return float(np.mean(self.per_example))


def pyramid_score(presences: Sequence[float]) -> float:
    """The unweighted mean presence of one summary's units; 0 for a reference without units
    (Lite²Pyramid's `metric/score.py` starts every summary at 0 and only summaries with units
    get a score, and the 0 counts in the system's mean: an n-gram unit file of a short
    reference, 5% of its n-grams rounded down, can hold none)."""
    if not presences:
        return 0.0
    return float(sum(float(p) for p in presences) / len(presences))


def pyramid_scores(presences_per_example: Sequence[Sequence[float]]) -> list[float]:
    """The Pyramid score of each summary from its unit presences (labels or probabilities)."""
    return [pyramid_score(row) for row in presences_per_example]


def system_score(per_example: Sequence[float]) -> float:
    """A system's score: the mean of its per-example scores."""
    if not per_example:
        raise SumbenchError("no examples to average")
    import numpy as np

    return float(np.mean(per_example))


def _check_presences(presences: Sequence[Sequence[float]],
                     units: Sequence[Sequence[str]], system: str) -> None:
    if len(presences) != len(units):
        raise SumbenchError(f"presence backend returned {len(presences)} rows for "
                            f"{len(units)} summaries of system {system!r}")
    for index, (row, example_units) in enumerate(zip(presences, units)):
        if len(row) != len(example_units):
            raise SumbenchError(f"presence backend returned {len(row)} values for "
                                f"{len(example_units)} units (system {system!r}, example "
                                f"{index + 1})")
        if any(not 0.0 <= float(p) <= 1.0 for p in row):
            raise SumbenchError(f"presence values must lie in [0, 1] (system {system!r}, "
                                f"example {index + 1})")


def evaluate_system(system: str, summaries: Sequence[str], units: Sequence[Sequence[str]],
                    presence: Presence,
                    weights: Sequence[Sequence[float]] | None = None) -> PyramidResult:
    """Score one system's summaries against the units of their examples (weighted by unit
    when `weights` are given, as Lite²Pyramid's --weight)."""
    presences = presence(list(summaries), [list(u) for u in units])
    _check_presences(presences, units, system)
    scores = pyramid_scores(presences) if weights is None else [
        weighted_pyramid_score(row, example_weights)
        for row, example_weights in zip(presences, weights)]
    return PyramidResult(system=system, per_example=tuple(scores),
                         presence=describe_presence(presence))


def describe_presence(presence: Presence) -> dict[str, Any]:
    """What a result file records of a presence backend: its fingerprint (model, revision,
    settings), where it has one."""
    described: dict[str, Any] = {}
    if callable(getattr(presence, "fingerprint", None)):
        described["fingerprint"] = presence.fingerprint()
    return described


def evaluate_dataset(dataset: PyramidDataset, units_kind: str, backend: str,
                     systems: Sequence[str] | None = None,
                     weights: Sequence[Sequence[float]] | None = None,
                     **options: Any) -> dict[str, PyramidResult]:
    """{system: PyramidResult} for the dataset's systems with the named presence backend;
    `weights` (per example, per unit) weight the units; `options` (None values = not given)
    go to the backend's factory."""
    if units_kind not in dataset.units:
        raise SumbenchError(f"units {units_kind!r} are not loaded (loaded: "
                            f"{', '.join(dataset.units) or 'none'})")
    name = check_presence_options(backend, units_kind, options)
    factory = presence_factory(name)
    units = dataset.units[units_kind]
    results = {}
    for system in systems or dataset.systems:
        if system not in dataset.summaries:
            raise SumbenchError(f"system {system!r} is not loaded (loaded: "
                                f"{', '.join(dataset.systems)})")
        presence = factory(dataset, system, units_kind, **options)
        results[system] = evaluate_system(system, dataset.summaries[system], units, presence,
                                          weights)
    return results


# ---- options ------------------------------------------------------------------------------
def _flags(names: Sequence[str]) -> str:
    return ", ".join(OPTION_FLAGS.get(name, name) for name in names)


def check_presence_options(backend: str, units_kind: str, options: Mapping[str, Any]) -> str:
    """The backend's canonical name, once its units and options (None = not given) are
    checked against `BACKEND_OPTIONS`; a clear SumbenchError otherwise."""
    name = canonical_backend(backend)
    spec = BACKEND_OPTIONS.get(name)
    if spec is not None and units_kind not in spec.units:
        raise SumbenchError(f"--presence {name} needs --units {' or '.join(spec.units)}, not "
                            f"{units_kind} ({spec.units_reason})")
    return check_backend_options(name, options)


def check_backend_options(backend: str, options: Mapping[str, Any]) -> str:
    """The backend's canonical name, once the options given (None = not given) are checked
    against its `BACKEND_OPTIONS`: each required one given, none it does not take. Backends
    without an entry (registered elsewhere) check their own options."""
    name = canonical_backend(backend)
    spec = BACKEND_OPTIONS.get(name)
    if spec is None:
        return name
    given = [key for key, value in options.items() if value is not None]
    missing = [key for key in spec.required if key not in given]
    if missing:
        hint = f" ({spec.model_help})" if "model" in missing and spec.model_help else ""
        raise SumbenchError(f"--presence {name} needs {_flags(missing)}{hint}")
    extra = [key for key in given if key not in spec.required + spec.accepted]
    if extra:
        takes = _flags(list(dict.fromkeys(spec.required + spec.accepted))) or "no options"
        raise SumbenchError(f"--presence {name} does not take {_flags(extra)} "
                            f"(it takes: {takes})")
    return name


#: the factory of each automatic backend, made once (its backends are kept models)
_AUTOMATIC = Kept(64)


def presence_factory(name: str) -> PresenceFactory:
    """The factory for backend `name`: the human labels, the lexical backend (calibrated
    on the folder), or an automatic one of the registry."""
    name = canonical_backend(name)
    if name == HUMAN:
        return human_presence
    if name == "lexical":
        return lexical_presence
    return _AUTOMATIC.get_or_build(name, lambda: AutomaticPresence(name))


def backend_names() -> list[str]:
    """What `sumbench pyramid --presence` accepts: "human", the built-in backends and
    those of installed packages (named without importing them)."""
    return sorted({*BACKEND_OPTIONS, *plugin_backend_names()})


def text_backend_names() -> list[str]:
    """The backends that judge the summary text (all but the human labels): what `sumbench
    qapyramid semi-auto/auto --presence` accepts; the built-in ones first."""
    return [*(name for name, spec in BACKEND_OPTIONS.items() if not spec.human_labels),
            *sorted(set(plugin_backend_names()) - set(BACKEND_OPTIONS))]


def canonical_backend(name: str) -> str:
    """A backend's name as registered (any case); unknown names suggest close ones."""
    known = backend_names()
    for candidate in known:
        if candidate.lower() == str(name).lower():
            return candidate
    return check_choice(name, known, "presence backend")  # none is: the error


# ---- backends -----------------------------------------------------------------------------
def human_presence(dataset: PyramidDataset, system: str, units_kind: str,
                   **options: Any) -> Presence:
    """The human SCU labels of `system` as a presence backend (only for SCUs)."""
    check_presence_options("human", units_kind, options)
    if system not in dataset.labels:
        raise SumbenchError(f"no human labels for system {system!r} (expected "
                            f"{dataset.label_path(system)})")
    labels = dataset.labels[system]

    def presence(summaries: list[str], units: list[list[str]]) -> list[list[float]]:
        if len(summaries) != len(labels):
            raise SumbenchError(f"{len(summaries)} summaries but {len(labels)} label rows")
        return [[float(value) for value in row] for row in labels]

    return presence


@functools.lru_cache(maxsize=8)
def _calibration(root: str, split: str, seed: int) -> tuple[float, tuple[str, ...]]:
    labelled = load_pyramid_dataset(root, unit_kinds=("scus",), labels=True)
    instances = pyramid_instances(labelled, split, seed)
    if not instances:
        raise SumbenchError(f"no human SCU labels in the {split} split of {root} to calibrate "
                            f"the lexical threshold on: give one (--threshold)")
    backend = LexicalBackend.calibrated([(i["summary"], i["unit"]) for i in instances],
                                        [i["label"] for i in instances])
    used = tuple(dict.fromkeys(i["example_id"] for i in instances))
    return backend.threshold, used


def lexical_calibration(root: str | Path, split: str = "train",
                        seed: int = DEFAULT_SPLIT_SEED) -> dict[str, Any]:
    """The lexical threshold that maximises micro F1 against the human SCU labels of the
    folder's `split` (all labelled systems; examples split by id with `seed`, as in the
    presence_detection task), and what it was fitted on: {"split", "seed", "n_examples",
    "example_ids" (in ids.txt order), "threshold"}. Computed once per process and folder."""
    threshold, used = _calibration(str(Path(root).resolve()), split, seed)
    return {"split": split, "seed": seed, "n_examples": len(used), "example_ids": list(used),
            "threshold": threshold}


def lexical_threshold(root: str | Path, split: str = "train",
                      seed: int = DEFAULT_SPLIT_SEED) -> float:
    """The calibrated lexical threshold of `lexical_calibration`."""
    return lexical_calibration(root, split, seed)["threshold"]


def dataset_split(dataset: PyramidDataset, split: str,
                  seed: int = DEFAULT_SPLIT_SEED) -> PyramidDataset:
    """The examples of `dataset` in `split` (by id, as the calibration splits them; "all"
    keeps every example), every aligned field filtered alike."""
    if check_split(split) == "all":
        return dataset
    keep = [i for i, example_id in enumerate(dataset.ids) if in_split(example_id, split, seed)]

    def pick(values: Sequence) -> tuple:
        return tuple(values[i] for i in keep)

    return dataclasses.replace(
        dataset, ids=pick(dataset.ids), documents=pick(dataset.documents),
        references=pick(dataset.references),
        units={kind: pick(units) for kind, units in dataset.units.items()},
        summaries={system: pick(texts) for system, texts in dataset.summaries.items()},
        labels={system: pick(rows) for system, rows in dataset.labels.items()})


def lexical_presence(dataset: PyramidDataset, system: str, units_kind: str,
                     threshold: float | None = None, **options: Any) -> Presence:
    """Lexical presence labels; `threshold` defaults to `lexical_threshold(dataset.root)`."""
    check_presence_options("lexical", units_kind, options)
    return LexicalBackend(lexical_threshold(dataset.root) if threshold is None else threshold)


class AutomaticPresence:
    """The factory of automatic backend `name` of leaderboard.evaluators.pyramid.presence,
    imported on its first call; the backends it builds (their models) are kept per options
    (presence.pyramid_factory)."""

    def __init__(self, name: str):
        self.name, self._factory = name, None

    def __call__(self, dataset: PyramidDataset, system: str, units_kind: str,
                 **options: Any) -> Presence:
        check_presence_options(self.name, units_kind, options)
        if self._factory is None:
            self._factory = pyramid_factory(self.name)
        return self._factory(dataset, system, units_kind, **options)



