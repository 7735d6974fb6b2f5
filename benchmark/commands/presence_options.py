"""The presence-backend options, defined once for every command that takes them (`sumbench
pyramid`, `sumbench qapyramid semi-auto|auto`): `add_presence_options` adds them to a parser,
`PresenceConfig.of(args)` reads them back, and `options()` gives what the backend takes."""
from __future__ import annotations

import argparse
from dataclasses import asdict, dataclass
from typing import Any

from benchmark.commands import positive_int, probability
from leaderboard.evaluators.presence import NLI_MODES

#: the model Lite²Pyramid's scorer loads when none is named (its --model default)
OFFICIAL_NLI_MODEL = "shiyue/roberta-large-tac08"


def add_presence_options(parser: argparse.ArgumentParser, backends: list[str]) -> None:
    """--presence (one of `backends`) and the options of the backends."""
    parser.add_argument("--presence", required=True, choices=backends,
                        help="who decides unit presence (human: the SCU labels)")
    parser.add_argument("--model", help="model folder or hub id (nli, seq2seq, causal-lm; "
                                        f"nli: {OFFICIAL_NLI_MODEL} by default, as "
                                        "Lite²Pyramid); model name (chat)")
    parser.add_argument("--threshold", type=probability,
                        help="present iff the backend's value >= T (lexical: content-token "
                             "recall, by default calibrated on the train split)")
    parser.add_argument("--nli-mode", choices=NLI_MODES,
                        help="nli: entailment probability (prob2, default; prob3) or label")
    parser.add_argument("--entailment-label", metavar="NAME",
                        help="nli: the class name (in the model's id2label, any case) that "
                             "means entailment (default: entailment)")
    parser.add_argument("--nli-max-length", type=positive_int, metavar="N",
                        help="nli: tokens of a (summary, unit) pair (default 400, as "
                             "Lite²Pyramid)")
    parser.add_argument("--batch-size", type=positive_int, help="model backends: batch size")
    parser.add_argument("--device", help="model backends: cpu (default), cuda, cuda:N")
    parser.add_argument("--cache", metavar="FILE", help="model and chat backends: a cache of "
                                                        "their outputs on disk")


#: PresenceConfig field -> the backend option it sets
OPTION_NAMES = {"model": "model", "threshold": "threshold", "nli_mode": "mode",
                "entailment_label": "entailment_label", "batch_size": "batch_size",
                "device": "device", "cache": "cache",
                "nli_max_length": "max_length"}


@dataclass(frozen=True)
class PresenceConfig:
    """A command's presence options (None: not given)."""
    presence: str
    model: str | None = None
    threshold: float | None = None
    nli_mode: str | None = None
    entailment_label: str | None = None
    nli_max_length: int | None = None
    batch_size: int | None = None
    device: str | None = None
    cache: str | None = None

    @classmethod
    def of(cls, args: argparse.Namespace) -> PresenceConfig:
        return cls(**{name: getattr(args, name) for name in asdict(cls(presence=""))})

    def options(self) -> dict[str, Any]:
        """The backend options given (their backend names: `mode`, `max_length`, ...); the
        nli backend's model is Lite²Pyramid's default when none is given."""
        given = {option: getattr(self, field) for field, option in OPTION_NAMES.items()
                 if getattr(self, field) is not None}
        if self.presence.lower() == "nli" and "model" not in given:
            given["model"] = OFFICIAL_NLI_MODEL
        return given
