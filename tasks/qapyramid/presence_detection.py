"""PRESENCE: is a content unit (a reference QA pair, its statement form, or an SCU) present in a
system summary? Micro F1 (positive = present), accuracy and AUC.

Data (`load(split, variant, data_dir)`), one instance per (example, system, unit):
- `qapyramid`: the QAPyramid dataset format (`QA_labels` + `system_outputs`; see
  tasks.qapyramid.dataset), from a local JSON/JSONL file or folder, or the hub when `data_dir`
  is None. Units are the QAs as is (`unit_kind="qa"`: "question? answer") or rewritten as
  statements (`unit_kind="statement"`, rules in tasks.qapyramid.units).
- `realsumm`, `pyrxsum`: Pyramid folders (tasks.qapyramid.pyramid_data); units are the human
  SCUs with their per-system labels. `data_dir` is the dataset folder or its parent.
Splits are by example id (60/20/20, seeded hash; `tasks.qapyramid.dataset.split_of`), so no
example's units or systems cross splits.

Format (consistent with USB FAC: the target is "Yes" when present, "No" otherwise):
`Is the content unit present in the summary? :  UNIT: {unit} SUMMARY: {summary}`.
Few-shot parts: `SUMMARY: {summary}` / `UNIT: {unit}` lines, cue `ANSWER:`, output Yes/No.
Prediction: `[p_present]` (like FAC's `[p_yes]`); text starting with yes -> [1.0], no -> [0.0],
anything else [0.5]. Metrics pool one probability per record: precision/recall/F1/accuracy on
the probability rounded half-to-even (0.5 counts as not present), AUC on the probability.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tasks.base import FewShotParts, ModelInput
from tasks.metrics.classification import flagged_scores, micro_f1
from tasks.plumbing.errors import DataError
from tasks.plumbing.registry import TASKS
from tasks.qapyramid.dataset import DEFAULT_SPLIT_SEED, in_split, load_examples
from tasks.qapyramid.pyramid_data import load_pyramid_dataset
from tasks.qapyramid.task import QAPyramidTask
from tasks.qapyramid.units import QA_UNIT_KINDS, unit_text
from tasks.units.kinds import SINGULAR, UnitKind, check_unit_kind
from tasks.validation import require_binary_label, require_probabilities, require_str

PRESENCE_INSTRUCTION = "Is the content unit present in the summary? : "
FEWSHOT_INSTRUCTION = ("Decide whether the content unit is present in the summary, that is, "
                       "stated in it or inferable from it. Answer Yes or No.")
FIELDS = ("id", "example_id", "system", "unit_index", "unit_kind", "summary", "unit", "label")
PYRAMID_VARIANTS = ("realsumm", "pyrxsum")
_ANSWER = re.compile(r"^\W*(yes|no)\b", re.IGNORECASE)
UNPARSEABLE = [0.5]


def presence_instance(example_id: str, system: str, unit_index: int, unit_kind: str,
                      summary: str, unit: str, label: int) -> dict:
    return {"id": f"{example_id}:{system}:{unit_index}", "example_id": example_id,
            "system": system, "unit_index": unit_index, "unit_kind": unit_kind,
            "summary": summary, "unit": unit, "label": int(label)}


def qapyramid_instances(examples, split: str = "all", unit_kind: str = "qa",
                        seed: int = DEFAULT_SPLIT_SEED) -> list[dict]:
    """Presence instances of QAPyramid examples with labels and summaries (`unit_kind`: qa
    or statement, in any spelling of tasks.units.kinds; the instances carry the singular)."""
    unit_kind = check_unit_kind(unit_kind, QA_UNIT_KINDS, "QAPyramid unit kind")
    instances = []
    for example in examples:
        if not in_split(example.example_id, split, seed):
            continue
        for system in example.labelled_systems:
            summary = example.system_outputs[system]
            for index, ((question, answer), label) in enumerate(
                    zip(example.qas, example.qa_labels[system])):
                instances.append(presence_instance(
                    example.example_id, system, index, unit_kind, summary,
                    unit_text(unit_kind, question, answer), label))
    return instances


def pyramid_root(data_dir: str | Path | None, variant: str) -> Path:
    if data_dir is None:
        raise DataError(f"variant {variant!r} needs data_dir: the {variant} folder (or the "
                        f"folder holding it) in the REALSumm/PyrXSum layout")
    root = Path(data_dir)
    return root / variant if (root / variant).is_dir() else root


def pyramid_instances(dataset, split: str = "all", seed: int = DEFAULT_SPLIT_SEED) -> list[dict]:
    """Presence instances of a `PyramidDataset`: every labelled (system, example, SCU)."""
    instances = []
    for position, example_id in enumerate(dataset.ids):
        if not in_split(example_id, split, seed):
            continue
        scus = dataset.units["scus"][position]
        for system in dataset.systems:
            if system not in dataset.labels:
                continue
            summary = dataset.summaries[system][position]
            for index, (unit, label) in enumerate(zip(scus, dataset.labels[system][position])):
                instances.append(presence_instance(example_id, system, index,
                                                   SINGULAR[UnitKind.SCUS], summary, unit, label))
    return instances


def presence_features():
    from datasets import Features, Value

    return Features({"id": Value("string"), "example_id": Value("string"),
                     "system": Value("string"), "unit_index": Value("int64"),
                     "unit_kind": Value("string"), "summary": Value("string"),
                     "unit": Value("string"), "label": Value("int64")})


@TASKS.decorator("PRESENCE")
class PresenceDetection(QAPyramidTask):
    name = "presence_detection"
    description = ("Is a content unit (QA pair, statement or SCU) present in a summary? "
                   "(micro F1).")
    variants = ("qapyramid",) + PYRAMID_VARIANTS
    #: `micro_f1` is the QAPyramid paper's headline: F1 micro-averaged over both classes
    #: (present, not present); `f1` stays the positive-class F1
    metric_names = ("precision", "recall", "f1", "accuracy", "auc", "micro_f1")
    main_metric = "micro_f1"
    output_kind = "probabilities"

    def __init__(self, unit_kind: str = "qa", split_seed: int = DEFAULT_SPLIT_SEED,
                 downloader=None):
        self.unit_kind, self.split_seed, self.downloader = unit_kind, split_seed, downloader

    # ---- data ---------------------------------------------------------------------------
    def features(self):
        return presence_features()

    def variant_instances(self, split: str, variant: str, data_dir: str | None) -> list[dict]:
        if variant == "qapyramid":
            examples = load_examples(data_dir, downloader=self.downloader)
            return qapyramid_instances(examples, split, self.unit_kind, self.split_seed)

        dataset = load_pyramid_dataset(pyramid_root(data_dir, variant))
        return pyramid_instances(dataset, split, self.split_seed)

    # ---- formats ------------------------------------------------------------------------
    @staticmethod
    def source_text(summary: str, unit: str) -> str:
        return f"{PRESENCE_INSTRUCTION} UNIT: {unit} SUMMARY: {summary}"

    @staticmethod
    def target_text(label: int) -> str:
        return "Yes" if label else "No"

    def format(self, instance: dict, tokenizer: Any = None,
               max_input_tokens: int | None = None) -> list[ModelInput]:
        target = self.target_text(instance["label"]) if "label" in instance else ""
        return [ModelInput(self.source_text(instance["summary"], instance["unit"]), target)]

    def fewshot_parts(self, instance: dict) -> FewShotParts:
        output = self.target_text(instance["label"]) if "label" in instance else ""
        return FewShotParts(content=f"SUMMARY: {instance['summary']}\nUNIT: {instance['unit']}",
                            output=output, cue="ANSWER:")

    def fewshot_prompt(self, query: dict, shots: Sequence[dict] = ()) -> str:
        """Instruction, then each shot's content, cue and answer, then the query and its cue."""
        blocks = [FEWSHOT_INSTRUCTION]
        for shot in shots:
            parts = self.fewshot_parts(shot)
            blocks.append(f"{parts.content}\n{parts.cue} {parts.output}")
        query_parts = self.fewshot_parts({k: v for k, v in query.items() if k != "label"})
        blocks.append(f"{query_parts.content}\n{query_parts.cue}")
        return "\n\n".join(blocks)

    # ---- parsing ------------------------------------------------------------------------
    def parse(self, text: str, instance: dict,
              model_input: ModelInput | None = None) -> list[float]:
        match = _ANSWER.match(text or "")
        if match is None:
            return list(UNPARSEABLE)
        return [1.0] if match.group(1).lower() == "yes" else [0.0]

    def is_parseable(self, text: str, instance: dict,
                     model_input: ModelInput | None = None) -> bool:
        return _ANSWER.match(text or "") is not None

    # ---- records and metrics ------------------------------------------------------------
    def prediction_record(self, instance: dict, prediction: Any) -> dict:
        record = {key: instance[key] for key in FIELDS if key not in ("summary",)}
        record["task"] = self.name
        record["prediction"] = [float(value) for value in prediction]
        return record

    def validate_fields(self, record: dict) -> None:
        for name in ("id", "example_id", "system", "unit"):
            require_str(record, name)
        require_probabilities(record, "prediction")
        require_binary_label(record, "label")

    def score_examples(self, records: Sequence[dict]) -> list[tuple[list[float], list[int], bool]]:
        """Per record: [p_present] (0 when the prediction is not `[p]`), [label], and whether
        the prediction's length differed from 1."""
        return [([float(r["prediction"][0]) if len(r["prediction"]) == 1 else 0.0],
                 [int(r["label"])], len(r["prediction"]) != 1) for r in records]

    def aggregate_scores(self, examples: Sequence) -> dict:
        """Pooled binary metrics, `micro_f1` (over both classes, rounded predictions), and
        `length_mismatches` (how many predictions were not `[p]` and counted as p = 0)."""
        scores = flagged_scores(examples)
        scores["micro_f1"] = micro_f1([v for values, _, _ in examples for v in values],
                                      [label for _, labels, _ in examples for label in labels])
        return scores
