"""The presence-backend options, defined once for every command that takes them (`sumbench
pyramid`, `sumbench qapyramid semi-auto|auto`): `add_presence_options` adds them to a parser,
`PresenceConfig.of(args)` reads them back, and `options()` gives what the backend takes."""
from __future__ import annotations

import argparse
from dataclasses import asdict, dataclass
from typing import Any

from benchmark.commands.options import add_option
from trainers.inference.generation import resolve_device

#: the model Lite²Pyramid's scorer loads when none is named (its --model default)
OFFICIAL_NLI_MODEL = "shiyue/roberta-large-tac08"


def add_presence_options(parser: argparse.ArgumentParser) -> None:
    """--presence and the options of the backends (benchmark.commands.options)."""
    for kind in ("presence", "model", "threshold", "nli_mode", "entailment_label",
                 "nli_max_length", "base_model", "claim_sentences", "batch_size", "device",
                 "cache"):
        add_option(parser, kind, required=kind == "presence")


#: the backends that run a model here (and so take a device)
MODEL_BACKENDS = ("nli", "seq2seq", "causal-lm", "minicheck", "alignscore")
#: PresenceConfig field -> the backend option it sets
OPTION_NAMES = {"model": "model", "threshold": "threshold", "nli_mode": "mode",
                "entailment_label": "entailment_label", "batch_size": "batch_size",
                "device": "device", "cache": "cache",
                "nli_max_length": "max_length", "base_model": "base_model",
                "claim_sentences": "claim_sentences"}


@dataclass(frozen=True)
class PresenceConfig:
    """A command's presence options (None: not given)."""
    presence: str
    model: str | None = None
    threshold: float | None = None
    nli_mode: str | None = None
    entailment_label: str | None = None
    nli_max_length: int | None = None
    base_model: str | None = None
    claim_sentences: str | None = None
    batch_size: int | None = None
    device: str | None = None
    cache: str | None = None

    @classmethod
    def of(cls, args: argparse.Namespace) -> PresenceConfig:
        return cls(**{name: getattr(args, name) for name in asdict(cls(presence=""))})

    def options(self) -> dict[str, Any]:
        """The backend options given (their backend names: `mode`, `max_length`, ...); the
        nli backend's model is Lite²Pyramid's default when none is given, and a model
        backend's device "auto" (also when none is given) the GPU when torch sees one."""
        given = {option: getattr(self, field) for field, option in OPTION_NAMES.items()
                 if getattr(self, field) is not None}
        if self.presence.lower() == "nli" and "model" not in given:
            given["model"] = OFFICIAL_NLI_MODEL
        if self.presence.lower() in MODEL_BACKENDS:
            given["device"] = resolve_device(given.get("device", "auto"))
        return given
