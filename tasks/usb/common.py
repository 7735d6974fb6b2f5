"""Shared pieces of the eight USB tasks: loading, content strings, SENT windows, records.

The exact input strings are those of shared/docs/usb-format.md §5: an instruction that ends
with a space, joined to the content by one more space (hence the double spaces).
"""
from __future__ import annotations

import re
from array import array
from collections.abc import Sequence
from typing import Any, ClassVar

from tasks.base import FewShotParts, ModelInput, Task
from tasks.metrics.classification import align_to_labels, flagged_scores, rounded_classes
from tasks.metrics.rouge import (
    BOOTSTRAP_SAMPLES,
    ROUGE_AGGREGATES,
    aggregate_rouge,
    geometric_mean,
    rouge_per_example,
    rouge_tokens,
)
from tasks.plumbing.errors import DataError, check_choice
from tasks.usb.loaders import GOLD_FIELDS, load_task_split
from tasks.validation import require_str

ROUGE_METRICS = ("rouge1", "rouge2", "rougel", "exactmatch")
CLASSIFICATION_METRICS = ("precision", "recall", "f1", "accuracy", "auc")
SPAN_METRICS = ("precision", "recall", "f1")


def joined(lines: Sequence[str]) -> str:
    """Input lines as one content string (one space between lines)."""
    return " ".join(lines)


def instructed(instruction: str, content: str) -> str:
    """`instruction` (ending with a space) joined to `content` with one more space."""
    return f"{instruction} {content}"


# ---- the base of every USB task ----------------------------------------------------------
class UsbTask(Task):
    """A USB task: data from the processed release, formats of §5, official records."""

    suite = "usb"
    #: the fields of a dataset record (and of the prediction record, before task/prediction)
    record_fields: ClassVar[tuple[str, ...]] = ()

    @property
    def answer_fields(self) -> tuple[str, ...]:
        """The instance fields that hold the answer: inputs without them (a leaderboard's
        public inputs) are predicted all the same, and their records carry no reference.
        The dataset's answer fields (GOLD_FIELDS) unless the task's instances differ."""
        return GOLD_FIELDS[self.name]

    def labelled(self, instance: dict) -> bool:
        """Whether the instance holds its answer (every `answer_fields` field)."""
        return all(field in instance for field in self.answer_fields)

    def load(self, split: str, variant: str = "all", data_dir: str | None = None):
        return load_task_split(self.name, split, variant=variant, data_dir=data_dir)

    # -- formats
    def source(self, instance: dict) -> str:
        raise NotImplementedError

    def target(self, instance: dict) -> str:
        raise NotImplementedError

    def gold_prediction(self, record: dict) -> Any:
        """The prediction that copies the record's gold answer (what a file built from the
        public gold would hold)."""
        raise NotImplementedError

    def reproduces_gold(self, record: dict) -> bool:
        """Whether the record's prediction is its gold answer as the task's metric sees it:
        for probabilities, the same decisions (rounded as the metrics round them, after the
        official truncation or padding, which a copy never needs); text tasks and UNSUP
        override it with their metric's own view."""
        if self.output_kind != "probabilities":
            raise NotImplementedError
        ((probabilities, labels, mismatched),) = self.score_examples([record])
        return not mismatched and rounded_classes(probabilities).tolist() == list(labels)

    def format(self, instance: dict, tokenizer: Any = None,
               max_input_tokens: int | None = None) -> list[ModelInput]:
        """One input/target pair (no target for an unlabelled instance); long inputs are left
        to the model's own truncation."""
        return [ModelInput(self.source(instance), self.target(instance)
                           if self.labelled(instance) else "")]

    # -- few-shot prompts (the official GPT-3.5 layout: `FIELD: ...` lines, then the cue)
    #: the word after which the model writes its output
    fewshot_cue: ClassVar[str] = "OUTPUT:"

    def fewshot_content(self, instance: dict) -> str:
        """The instance's input as labelled lines (`CONTENT: ...`), without instruction."""
        raise NotImplementedError

    def fewshot_parts(self, instance: dict) -> FewShotParts:
        return FewShotParts(self.fewshot_content(instance), self.target(instance)
                            if self.labelled(instance) else "", self.fewshot_cue)

    # -- parsing
    def parse(self, text: str, instance: dict, model_input: ModelInput | None = None) -> Any:
        """Generated text kept verbatim, as the official evaluation scores the decoded string
        (exact match and UNSUP's character diff see every space)."""
        return text

    def is_parseable(self, text: str, instance: dict,
                     model_input: ModelInput | None = None) -> bool:
        """Whether `parse` read a real answer from `text` (False when it fell back)."""
        return True

    # -- records
    def reference_fields(self, instance: dict) -> dict:
        """Fields the official record adds after `task` (e.g. `output_string`)."""
        return {}

    def record_keys(self, instance: dict) -> tuple[str, ...]:
        """The dataset fields in the official record's order (whatever the instance's)."""
        return self.record_fields

    def prediction_record(self, instance: dict, prediction: Any) -> dict:
        """The official record: the dataset fields in official order, then `task`, the
        reference fields and `prediction`; an unlabelled instance's record has neither its
        answer nor the reference fields (it is submitted, not scored here)."""
        keys = self.record_keys(instance)
        labelled = self.labelled(instance)
        if not labelled:
            keys = tuple(key for key in keys if key not in self.answer_fields)
        missing = [key for key in keys if key not in instance and key != "task"]
        if missing:
            raise DataError(f"instance lacks {', '.join(missing)}", field=missing[0])
        record = {key: self.name if key == "task" else instance[key] for key in keys}
        record["task"] = self.name
        if labelled:
            record.update(self.reference_fields(instance))
        record["prediction"] = self.clean_prediction(prediction)
        return record

    def clean_prediction(self, prediction: Any) -> Any:
        if self.output_kind == "probabilities" and not isinstance(prediction, str):
            return [float(value) for value in prediction]
        return prediction

    def headline(self, scores: dict) -> float | None:
        """100 x the main metric; None when it is undefined (None)."""
        value = scores[self.main_metric]
        return None if value is None else 100.0 * float(value)


class TextTask(UsbTask):
    """Generation tasks scored with ROUGE against `output_string` (ABS, COMP, TOPIC, FIX)."""

    output_kind = "text"
    metric_names = ROUGE_METRICS
    main_metric = "rouge_gmean"
    option_names = ("rouge_aggregate", "rouge_seed")

    def __init__(self, rouge_aggregate: str = "mean", rouge_seed: int = 0):
        check_choice(rouge_aggregate, ROUGE_AGGREGATES, "ROUGE aggregate")
        self.rouge_aggregate, self.rouge_seed = rouge_aggregate, int(rouge_seed)

    def aggregate_name(self) -> str:
        """Which ROUGE aggregate ran, as results record it."""
        if self.rouge_aggregate == "mean":
            return "mean"

        return f"bootstrap-mid (seed {self.rouge_seed}, {BOOTSTRAP_SAMPLES} resamples)"

    def reference(self, instance: dict) -> str:
        return joined(instance["output_lines"])

    def target(self, instance: dict) -> str:
        return self.reference(instance)

    def gold_prediction(self, record: dict) -> str:
        return record["output_string"]

    def reference_fields(self, instance: dict) -> dict:
        return {"output_string": self.reference(instance)}

    fewshot_cue = "SUMMARY:"

    def fewshot_content(self, instance: dict) -> str:
        return f"CONTENT: {joined(instance['input_lines'])}"

    def validate_fields(self, record: dict) -> None:
        require_str(record, "prediction")
        require_str(record, "output_string")

    def score_examples(self, records: Sequence[dict]) -> list[dict]:
        return rouge_per_example([r["prediction"] for r in records],
                                 [r["output_string"] for r in records])

    def reproduces_gold(self, record: dict) -> bool:
        """The same lower-cased string for an exact-match task (FIX), else the same ROUGE
        tokens (rouge-score's lower-cased runs of [a-z0-9]: what every ROUGE score reads)."""
        prediction, gold = record.get("prediction"), self.gold_prediction(record)
        if not isinstance(prediction, str):
            return False
        if self.main_metric == "exactmatch":
            return prediction.lower() == gold.lower()
        return rouge_tokens(prediction) == rouge_tokens(gold)

    def aggregate_scores(self, examples: Sequence[dict]) -> dict:
        """rouge1, rouge2, rougel, exactmatch, `rouge_gmean` (their R1/R2/RL mean) and
        `rouge_aggregate` (which aggregate ran: mean or the bootstrap median)."""
        scores = aggregate_rouge(examples, self.rouge_aggregate, self.rouge_seed)
        scores["rouge_gmean"] = geometric_mean(
            [scores["rouge1"], scores["rouge2"], scores["rougel"]])
        scores["rouge_aggregate"] = self.aggregate_name()
        return scores

    def headline(self, scores: dict) -> float | None:
        if self.main_metric != "rouge_gmean":
            return super().headline(scores)

        return 100.0 * geometric_mean([scores["rouge1"], scores["rouge2"], scores["rougel"]])


# ---- SENT-numbered line labelling (EXT, EVEXT) ------------------------------------------
_SENT_LABEL = re.compile(r"SENT\s*(\d+)\W*(yes|no)\b", re.IGNORECASE)


def sent_source(prefix: str, lines: Sequence[str]) -> str:
    """`prefix` followed by ` SENT{k} {line}` per line (k from 0), the whole stripped."""
    return (prefix + "".join(f" SENT{k} {line}" for k, line in enumerate(lines))).strip()


def sent_target(labels: Sequence[int]) -> str:
    return " ".join(f"SENT{k} {'Yes' if label else 'No'}" for k, label in enumerate(labels))


def parse_sent_labels(text: str, n_lines: int) -> tuple[list[float], int]:
    """Per-line 1.0 (Yes) / 0.0 (No) from `SENT{k} Yes|No` pairs; missing lines get 0.0.

    Returns the values and how many distinct lines were labelled (first pair per line wins).
    """
    values: list[float | None] = [None] * n_lines
    for match in _SENT_LABEL.finditer(text):
        k = int(match.group(1))
        if k < n_lines and values[k] is None:
            values[k] = 1.0 if match.group(2).lower() == "yes" else 0.0
    found = sum(value is not None for value in values)
    return [0.0 if value is None else value for value in values], found


def sentence_windows(prefix: str, lines: Sequence[str], tokenizer: Any, max_input_tokens: int,
                     cap_line_tokens: bool = False) -> list[tuple[int, int]]:
    """Windows [start, end) of whole lines, cut as the USB release's Flan-T5 conversion
    (experiments/flant5/convert_datasets_for_flant5.py) cuts them.

    Counts are of tokens without special tokens: a window starts at the count of `prefix`,
    and each line adds that of `SENT{k} {line}` encoded alone (k: its position in the
    window). A line joins while the sum stays strictly below `max_input_tokens`, else it
    opens the next window. With `cap_line_tokens` (EVEXT) a line counts at most
    `max_input_tokens - prefix - 1`, so it fits an empty window. A line too long for an
    empty window (EXT), on which the release loops forever, gets a window of its own: the
    one deliberate deviation (the model's input truncation then cuts it).
    """
    def count(text: str) -> int:
        return len(tokenizer(text, add_special_tokens=False)["input_ids"])

    prefix_count = count(prefix)
    cap = max(max_input_tokens - prefix_count - 1, 0) if cap_line_tokens else None
    windows: list[tuple[int, int]] = []
    start = 0
    while start < len(lines):
        end, used = start, prefix_count
        while end < len(lines):
            size = count(f"SENT{end - start} {lines[end]}")
            size = size if cap is None else min(size, cap)
            if used + size >= max_input_tokens:
                break
            end, used = end + 1, used + size
        windows.append((start, max(end, start + 1)))
        start = windows[-1][1]
    return windows or [(0, 0)]


class LineLabelTask(UsbTask):
    """Yes/No per input line, `SENT{k}`-numbered and windowed (EXT, EVEXT)."""

    output_kind = "probabilities"
    metric_names = CLASSIFICATION_METRICS
    #: cap each line's token count so that it fits an empty window (the release's EVEXT)
    cap_line_tokens: ClassVar[bool] = False

    def prefix(self, instance: dict) -> str:
        """The instruction part before the first ` SENT0` (ends with a space)."""
        raise NotImplementedError

    def record_line_labels(self, record: dict) -> list[int]:
        """0/1 per input line of a prediction record (the scoring reference)."""
        return self.line_labels(record)

    def gold_prediction(self, record: dict) -> list[float]:
        return [float(label) for label in self.record_line_labels(record)]

    def score_examples(self, records: Sequence[dict]) -> list[tuple[list[float], list[int], bool]]:
        """Per record: probabilities truncated/padded to the lines, labels, mismatch flag."""
        examples = []
        for record in records:
            labels = self.record_line_labels(record)
            aligned, mismatched = align_to_labels(record["prediction"], len(labels))
            # a record stitched from official windows keeps its windows' mismatches
            mismatched = mismatched or bool(record.get("window_length_mismatches"))
            examples.append((aligned, labels, mismatched))
        return examples

    @staticmethod
    def compact_examples(examples: Sequence) -> list:
        """The same material in 8 bytes a probability and 1 a label (what streaming scoring
        keeps per record; `aggregate_scores` reads both forms)."""
        return [(array("d", values), array("b", labels), mismatched)
                for values, labels, mismatched in examples]

    def aggregate_scores(self, examples: Sequence) -> dict:
        return flagged_scores(examples)

    def line_labels(self, instance: dict) -> list[int]:
        """Gold 0/1 per input line."""
        raise NotImplementedError

    fewshot_cue = "LABELS:"

    def fewshot_header(self, instance: dict) -> str:
        """The labelled fields before the numbered sentences (`CONTENT:`), to which
        ` SENT0 ...` is appended."""
        return "CONTENT:"

    def fewshot_parts(self, instance: dict,
                      lines: tuple[int, int] | None = None) -> FewShotParts:
        """Lines [start, end) (all by default) numbered from SENT0; the output is the Yes/No
        sequence, and `extra["line_labels"]` the gold 0/1 per line for other output forms."""
        start, end = lines if lines is not None else (0, len(instance["input_lines"]))
        labels = self.line_labels(instance)[start:end] if self.labelled(instance) else []
        content = sent_source(self.fewshot_header(instance), instance["input_lines"][start:end])
        return FewShotParts(content, sent_target(labels), self.fewshot_cue,
                            {"line_labels": labels})

    def format(self, instance: dict, tokenizer: Any = None,
               max_input_tokens: int | None = None) -> list[ModelInput]:
        """Windows of whole lines under the budget `max_input_tokens`, counted as the
        release's conversion counts them (see `sentence_windows`; 1024 there); a single
        window covering every line without a tokenizer or budget."""
        lines, prefix = instance["input_lines"], self.prefix(instance)
        labels = self.line_labels(instance) if self.labelled(instance) else []
        if tokenizer is None or max_input_tokens is None:
            windows = [(0, len(lines))]
        else:
            windows = sentence_windows(prefix, lines, tokenizer, max_input_tokens,
                                       self.cap_line_tokens)
        return [ModelInput(sent_source(prefix, lines[start:end]),
                           sent_target(labels[start:end]) if labels else "", window=number,
                           lines=(start, end))
                for number, (start, end) in enumerate(windows)]

    @staticmethod
    def _window_size(instance: dict, model_input: ModelInput | None) -> int:
        if model_input is not None and model_input.lines is not None:
            return model_input.lines[1] - model_input.lines[0]
        return len(instance["input_lines"])

    def parse(self, text: str, instance: dict,
              model_input: ModelInput | None = None) -> list[float]:
        """1.0/0.0 per line of the window from `SENT{k} Yes|No`; unlabelled lines get 0.0."""
        return parse_sent_labels(text, self._window_size(instance, model_input))[0]

    def is_parseable(self, text: str, instance: dict,
                     model_input: ModelInput | None = None) -> bool:
        """True when every line of the window got a Yes/No."""
        size = self._window_size(instance, model_input)
        return parse_sent_labels(text, size)[1] == size

    def combine(self, window_predictions: Sequence[Any], instance: dict,
                model_inputs: Sequence[ModelInput]) -> list[float]:
        """Window predictions in line order, each cut or zero-padded to its window's size;
        the windows must cover all input lines exactly once."""
        if len(window_predictions) != len(model_inputs):
            raise ValueError(f"{len(window_predictions)} predictions for "
                             f"{len(model_inputs)} windows")
        pairs = sorted(zip(model_inputs, window_predictions), key=lambda pair: pair[0].lines)
        combined: list[float] = []
        for model_input, values in pairs:
            start, end = model_input.lines
            if start != len(combined):
                raise ValueError(f"window {model_input.window} starts at line {start}, "
                                 f"expected {len(combined)}")
            values = [float(value) for value in values][:end - start]
            combined.extend(values + [0.0] * (end - start - len(values)))
        if len(combined) != len(instance["input_lines"]):
            raise ValueError(f"windows cover {len(combined)} of "
                             f"{len(instance['input_lines'])} lines")
        return combined
