"""Reading the Yes/No answers of FAC, EXT and EVEXT into prediction values (usb-baselines.md
§5.4), for the paper's Llama and Vicuna styles (`llama`, `vicuna`, `vicuna-chat`).

The answer is the completion up to its first newline (every gold output of the release's layout
is one line). Two readings (`--label-reading`):

- `probabilities` (the default of those styles): the release's predict_classes reading. At each
  generated "Yes" or "No" token of the answer, P(Yes) / (P(Yes) + P(No)) from that step's
  distribution (the backend records them: `yes_probabilities`, {character offset of the word in
  the raw output: p}); the list, in order, is the prediction. Only the label words as the shots
  write them count: a lowercase "yes" / "no" is not a label token. FAC needs exactly one value:
  zero or several are left as they are, and the official scorer reads such a list as
  "supported" (its default). EXT / EVEXT: one value per Yes/No token of the window; the window
  stitching and the official scorer truncate the list, or pad it with 0, to the window's lines.
- `phrases`: hard labels by the release's GPT-3.5 post-processing (`chatgpt/postprocess.py`):
  FAC by its phrase rules in order (trainers.fewshot.official_prompts.parse_fac, default [1.0]);
  EXT / EVEXT by `SENTk Yes` / `SENTk No` pairs (tasks.usb.common.parse_sent_labels, any case,
  unlabelled lines 0.0).

An answer with no readable label is counted (`unreadable_answers` of the runner's report) rather
than passed off silently as the scorer's default: FAC with zero or several values
(probabilities) or no phrase rule matched (phrases); EXT / EVEXT with no value at all. An answer is
`ok` (the runner's `unparseable` counts the others) when it has exactly the values expected: one
for FAC, one per line of the window for EXT / EVEXT.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tasks.plumbing.errors import SumbenchError
from tasks.usb.common import parse_sent_labels
from trainers.fewshot.official_prompts import parse_fac

LABEL_READINGS = ("probabilities", "phrases")
#: the styles whose label answers are read this way, and their default reading
DEFAULT_READINGS = {"llama": "probabilities", "vicuna": "probabilities",
                    "vicuna-chat": "probabilities"}
#: the label words as the shots write them (the tokens the probabilities are taken at)
LABEL_WORDS = ("Yes", "No")


@dataclass(frozen=True)
class ReadLabels:
    """One answer read: the prediction values, whether they are exactly what was expected
    (`ok`), and whether any label could be read at all (`readable`)."""
    values: list[float]
    ok: bool
    readable: bool


def is_label_task(task: Any) -> bool:
    """Tasks answered by Yes/No labels: FAC (one value) and the line tasks (EXT, EVEXT)."""
    return getattr(task, "output_kind", None) == "probabilities"


def resolve_label_reading(style: Any, task: Any, label_reading: str | None) -> str | None:
    """The reading of `task`'s answers under `style`: `label_reading` when given, else the
    style's default; None for tasks without Yes/No labels and for styles read by the general
    parsers (trainers.fewshot.parsers). A reading asked of a style whose EXT / EVEXT answers
    are id lists, or an unknown reading, is refused."""
    if label_reading is not None and label_reading not in LABEL_READINGS:
        raise SumbenchError(f"label reading must be one of {', '.join(LABEL_READINGS)}, got "
                            f"{label_reading!r}")
    if label_reading is not None and getattr(style, "line_output", "yes_no") != "yes_no":
        raise SumbenchError(f"--label-reading reads Yes/No answers; style {style.name!r} asks "
                            f"for sentence ids (styles with Yes/No answers: "
                            f"{', '.join(sorted(DEFAULT_READINGS))}, flan-t5)")
    if not is_label_task(task):
        return None
    return label_reading or DEFAULT_READINGS.get(getattr(style, "name", ""))


def answer_line(raw: str) -> str:
    """The completion up to its first newline."""
    return (raw or "").split("\n", 1)[0]


def label_values(raw: str, yes_probabilities: Mapping[Any, float] | None) -> list[float]:
    """p(Yes) at each Yes/No label word of the answer line, in order (offsets in `raw`)."""
    line = answer_line(raw)
    found = []
    for offset, value in (yes_probabilities or {}).items():
        start = int(offset)
        if start < len(line) and line.startswith(LABEL_WORDS, start):
            found.append((start, float(value)))
    return [value for _, value in sorted(found)]


def read_labels(reading: str, raw: str, yes_probabilities: Mapping[Any, float] | None,
                n_lines: int | None) -> ReadLabels:
    """One answer (one window of EXT / EVEXT, with its `n_lines`; None for FAC) read by
    `reading` (module docstring)."""
    if reading == "probabilities":
        values = label_values(raw, yes_probabilities)
        expected = 1 if n_lines is None else n_lines
        readable = len(values) == 1 if n_lines is None else bool(values)
        return ReadLabels(values, len(values) == expected, readable)
    if reading == "phrases":
        line = answer_line(raw)
        if n_lines is None:
            values, parsed = parse_fac(line)
            return ReadLabels(values, parsed, parsed)
        values, found = parse_sent_labels(line, n_lines)
        return ReadLabels(values, found == n_lines, found > 0)
    raise SumbenchError(f"label reading must be one of {', '.join(LABEL_READINGS)}, got "
                        f"{reading!r}")


def needs_probabilities(reading: str | None, backend: Any) -> bool:
    """Whether the backend must be asked for label probabilities; a backend that cannot give
    them is refused (naming the way out) rather than leaving every answer unreadable."""
    if reading != "probabilities":
        return False
    if not getattr(backend, "reads_label_probabilities", False):
        raise SumbenchError(
            "--label-reading probabilities reads P(Yes) / (P(Yes) + P(No)) at the generated "
            "Yes/No tokens, which this backend does not give (hf-causal and hf-seq2seq do; "
            "openai with --top-logprobs > 0); use --label-reading phrases for the release's "
            "phrase rules")
    check = getattr(backend, "check_label_probabilities", None)
    if callable(check):
        try:
            check()
        except SumbenchError as error:
            raise SumbenchError(f"{error}; use --label-reading phrases for the release's "
                                f"phrase rules") from None
    return True
