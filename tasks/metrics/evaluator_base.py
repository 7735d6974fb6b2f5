"""The evaluator interface (`Evaluator`): a metric that scores each summary of a system, with
several references per summary, and the option tables evaluators read their options with
(`option_values`). Its own module so that metrics defined beside it (tasks.metrics.meteor,
chrf) subclass it while tasks.metrics.evaluators, the registry, imports them."""
from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tasks.plumbing.errors import SumbenchError, UnknownNameError, check_choices, did_you_mean

#: a summary's references: one text, or several
References = Sequence[str | Sequence[str]]


class Evaluator(ABC):
    """A metric that scores each summary (see the module)."""

    name: str = ""
    reads_sources: bool = False      # score() needs each summary's source document
    reads_references: bool = True    # score() reads the references
    #: the options `with_options` takes, by name
    option_names: tuple[str, ...] = ()
    #: options whose value names a model (a board resolves them under its model root)
    model_options: tuple[str, ...] = ()

    @property
    def settings(self) -> dict:
        """What is recorded beside this evaluator's scores (JSON-able)."""
        return {"evaluator": self.name}

    def with_options(self, options: Mapping[str, Any]) -> Evaluator:
        """This evaluator with `options` changed; an unknown or bad one is a SumbenchError.
        (This refuses names outside `option_names`; an evaluator with options overrides it
        to apply them, calling it for the names it does not know.)"""
        if options and not self.option_names:
            raise SumbenchError(f"evaluator {self.name!r} takes no options (got "
                                f"{', '.join(sorted(options))})")
        check_choices(sorted(options), self.option_names, f"{self.name} option")
        return self

    def cost(self) -> dict | None:
        """What the latest `score` call spent (seconds, model calls), if it counts."""
        return None

    def problem(self) -> str | None:
        """Why this evaluator, as configured, cannot score (a required option missing), or
        None; checked before it scores, and by a board's `init`."""
        return None

    @abstractmethod
    def score(self, summaries: Sequence[str], references: Sequence[Sequence[str]],
              sources: Sequence[str] | None) -> list[float]:
        """One score per summary; `references[i]` are the i-th summary's references."""


# ---- option tables: option -> (parser of its text, default) -----------------------------
OptionTable = Mapping[str, tuple[Callable[[str], Any], Any]]


def option_values(options: Mapping[str, Any], table: OptionTable, what: str,
                  known: Sequence[str] | None = None) -> dict[str, Any]:
    """Every option of `table` (or of its `known` names), `options` over the defaults: text
    parsed by its option's parser, values already parsed kept. An unknown name is an
    UnknownNameError listing the known ones; a bad value a SumbenchError naming the option
    (`what` names the evaluator: "QuestEval", "geval", ...)."""
    names = list(table if known is None else known)
    unknown = [name for name in options if name not in names]
    if unknown:
        raise UnknownNameError(f"unknown {what} option {unknown[0]!r} (known: "
                               f"{', '.join(names)}){did_you_mean(unknown[:1], names)}")
    values = {name: table[name][1] for name in names}
    for name, value in options.items():
        try:
            values[name] = table[name][0](value) if isinstance(value, str) else value
        except (ValueError, TypeError, SumbenchError) as error:
            raise SumbenchError(f"{what} option {name}={value!r}: {error}") from None
    return values


def positive_int(text: str) -> int:
    """An option's positive integer."""
    value = int(str(text).strip())
    if value < 1:
        raise ValueError("expected a positive integer")
    return value


def one_of(*choices: str) -> Callable[[str], str]:
    """A parser of one of `choices` (any case)."""
    def parse(text: str) -> str:
        value = str(text).strip().lower()
        if value not in choices:
            raise ValueError(f"expected {' or '.join(choices)}")
        return value
    return parse
