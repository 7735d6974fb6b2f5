"""QAGEN: generate the QA-SRL pairs of one predicate of a reference summary.

Instances: one per (reference, predicate), with the gold QAs of that predicate.
- variant `qapyramid`: the QAPyramid dataset format (local file/folder, or the hub when
  `data_dir` is None). Its `QAs` list is flat, so predicates are recovered with
  `units.group_by_predicate`; pass `judgments=<QA_presence.json>` to use the exact predicate
  grouping of the raw file for the examples it covers.
- variant `raw`: `data_dir` is QA_presence.json (or its folder). The file has the grouping and
  the QAs but no reference text: instances are built only for examples whose reference is
  given through the `references={example_id: text}` option (a DataError says so otherwise).
The predicate is shown as a word (`units.predicate_word`: a question verb as it occurs in the
reference). Splits are by example id (tasks.qapyramid.dataset.split_of).

Format (seq2seq): `Generate question-answer pairs for the predicate "{predicate}" :  {reference}`
-> `q1? a1 | q2? a2` (see tasks.metrics.qa.linearize_qas). Few-shot parts: `PREDICATE: ...`
and `TEXT: ...` lines, cue `QAS:`; few-shot runners never take shots from the same reference
(`group_key` is the example id).
Metrics: `rougel` (ROUGE-L F between linearised generated and gold lists, mean over
predicates), `ua_precision`/`ua_recall`/`ua_f1` (tasks.metrics.qa; micro over predicates), and
BERTScore (`bertscore_*`, mean over predicates) only when the `bertscore_model` option names a
model. `score_examples` keeps per predicate the ROUGE-L, the UA counts and the BERTScore values,
so a bootstrap resamples predicates without re-running any model.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tasks.base import FewShotParts, ModelInput
from tasks.metrics.qa import (
    BERTSCORE_KEYS,
    bertscore_per_example,
    linearize_qas,
    parse_qa_list,
    prf,
    ua_counts,
)
from tasks.metrics.rouge import rouge_per_example
from tasks.plumbing.errors import DataError
from tasks.plumbing.registry import TASKS
from tasks.qapyramid.dataset import (
    DEFAULT_SPLIT_SEED,
    in_split,
    load_examples,
    raw_predicate_groups,
)
from tasks.qapyramid.task import QAPyramidTask
from tasks.qapyramid.units import predicate_word
from tasks.validation import require_str

JUDGMENTS_FILE = "QA_presence.json"


def qagen_instance(example_id: str, index: int, reference: str,
                   qas: Sequence[Sequence[str]]) -> dict:
    qas = [[str(question), str(answer)] for question, answer in qas]
    return {"id": f"{example_id}:{index}", "example_id": example_id, "predicate_index": index,
            "predicate": predicate_word([q for q, _ in qas], reference),
            "reference": reference, "qas": qas}


def instances_from_examples(examples, split: str = "all", seed: int = DEFAULT_SPLIT_SEED,
                            raw_groups: Mapping[str, list] | None = None) -> list[dict]:
    """One instance per predicate of each example in `split`."""
    instances = []
    for example in examples:
        if not in_split(example.example_id, split, seed):
            continue
        if raw_groups and example.example_id in raw_groups:
            groups = [qas for _, qas in raw_groups[example.example_id]]
        else:
            groups = [[example.qas[i] for i in group] for group in example.predicate_groups()]
        instances.extend(qagen_instance(example.example_id, index, example.reference, qas)
                         for index, qas in enumerate(groups))
    return instances


def instances_from_raw(raw_groups: Mapping[str, list], references: Mapping[str, str],
                       split: str = "all", seed: int = DEFAULT_SPLIT_SEED) -> list[dict]:
    """Instances from raw predicate groupings, for the examples with a known reference."""
    instances = []
    for example_id, predicates in raw_groups.items():
        if example_id not in references or not in_split(example_id, split, seed):
            continue
        instances.extend(qagen_instance(example_id, index, references[example_id], qas)
                         for index, (_, qas) in enumerate(predicates))
    return instances


def qagen_features():
    from datasets import Features, Value
    from datasets import Sequence as Seq

    return Features({"id": Value("string"), "example_id": Value("string"),
                     "predicate_index": Value("int64"), "predicate": Value("string"),
                     "reference": Value("string"), "qas": Seq(Seq(Value("string")))})


def _require_pairs(record: dict, name: str) -> list:
    value = record.get(name)
    if not isinstance(value, list) or not all(
            isinstance(pair, (list, tuple)) and len(pair) == 2
            and all(isinstance(part, str) for part in pair) for pair in value):
        raise DataError("expected a list of [question, answer] string pairs", field=name)
    return value


@TASKS.decorator("QAGEN")
class QAGeneration(QAPyramidTask):
    name = "qa_generation"
    description = "Generate the QA-SRL pairs of one predicate of a reference (ROUGE-L, UA)."
    variants = ("qapyramid", "raw")
    metric_names = ("rougel", "ua_precision", "ua_recall", "ua_f1")
    main_metric = "rougel"
    output_kind = "text"

    def __init__(self, split_seed: int = DEFAULT_SPLIT_SEED, downloader=None,
                 judgments: str | None = None, references: Mapping[str, str] | None = None,
                 ua_threshold: float = 0.5, bertscore_model: str | None = None):
        self.split_seed, self.downloader = split_seed, downloader
        self.judgments, self.references = judgments, dict(references or {})
        self.ua_threshold, self.bertscore_model = ua_threshold, bertscore_model

    # ---- data ---------------------------------------------------------------------------
    def features(self):
        return qagen_features()

    def variant_instances(self, split: str, variant: str, data_dir: str | None) -> list[dict]:
        if variant == "raw":
            return self._raw_instances(split, data_dir)
        raw = raw_predicate_groups(self.judgments) if self.judgments else None
        return instances_from_examples(load_examples(data_dir, self.downloader), split,
                                       self.split_seed, raw)

    def _raw_instances(self, split: str, data_dir: str | None) -> list[dict]:
        if data_dir is None:
            raise DataError(f"variant 'raw' needs data_dir: the {JUDGMENTS_FILE} file")
        path = Path(data_dir)
        path = path / JUDGMENTS_FILE if path.is_dir() else path
        raw = raw_predicate_groups(path)
        if not any(example_id in self.references for example_id in raw):
            raise DataError("the raw judgments file has no reference texts: pass "
                            "references={example_id: reference} (or use the QAPyramid "
                            "dataset format) to build QA generation inputs", path=str(path))
        return instances_from_raw(raw, self.references, split, self.split_seed)

    # ---- formats ------------------------------------------------------------------------
    @staticmethod
    def source_text(reference: str, predicate: str) -> str:
        return f'Generate question-answer pairs for the predicate "{predicate}" :  {reference}'

    def format(self, instance: dict, tokenizer: Any = None,
               max_input_tokens: int | None = None) -> list[ModelInput]:
        return [ModelInput(self.source_text(instance["reference"], instance["predicate"]),
                           linearize_qas(instance.get("qas", [])))]

    def fewshot_parts(self, instance: dict) -> FewShotParts:
        return FewShotParts(
            content=f"PREDICATE: {instance['predicate']}\nTEXT: {instance['reference']}",
            output=linearize_qas(instance.get("qas", [])), cue="QAS:")

    # ---- parsing ------------------------------------------------------------------------
    def parse(self, text: str, instance: dict,
              model_input: ModelInput | None = None) -> list[list[str]]:
        return [[question, answer] for question, answer in parse_qa_list(text)]

    # ---- records and metrics ------------------------------------------------------------
    def prediction_record(self, instance: dict, prediction: Any) -> dict:
        record = {key: instance[key] for key in
                  ("id", "example_id", "predicate_index", "predicate", "qas")}
        record["task"] = self.name
        if isinstance(prediction, str):
            prediction = self.parse(prediction, instance)
        record["prediction"] = [[str(q), str(a)] for q, a in prediction]
        return record

    def validate_fields(self, record: dict) -> None:
        require_str(record, "id")
        _require_pairs(record, "qas")
        _require_pairs(record, "prediction")

    def score_examples(self, records: Sequence[dict]) -> list[dict]:
        """Per record (predicate): `rougel` of the linearised lists, `ua` = (matched,
        generated, gold) answer counts, and BERTScore P/R/F when `bertscore_model` is set."""
        generated = [[tuple(pair) for pair in r["prediction"]] for r in records]
        gold = [[tuple(pair) for pair in r["qas"]] for r in records]
        generated_texts = [linearize_qas(pairs) for pairs in generated]
        gold_texts = [linearize_qas(pairs) for pairs in gold]
        rouge = rouge_per_example(generated_texts, gold_texts)
        examples = [{"rougel": values["rougel"],
                     "ua": ua_counts([a for _, a in predicted], [a for _, a in expected],
                                     self.ua_threshold)}
                    for values, predicted, expected in zip(rouge, generated, gold)]
        if self.bertscore_model:
            per_example = bertscore_per_example(generated_texts, gold_texts,
                                                self.bertscore_model)
            for example, values in zip(examples, per_example):
                example.update(values)
        return examples

    def aggregate_scores(self, examples: Sequence[dict]) -> dict:
        """Mean ROUGE-L, micro UA precision/recall/F1 over predicates, mean BERTScore."""
        import numpy as np

        if not examples:
            raise ValueError("QA generation scores need at least one record")
        scores = {"rougel": float(np.mean([example["rougel"] for example in examples]))}
        totals = [sum(example["ua"][k] for example in examples) for k in range(3)]
        scores.update({f"ua_{key}": value for key, value in prf(*totals).items()})
        for key in BERTSCORE_KEYS:
            if key in examples[0]:
                scores[key] = sum(example[key] for example in examples) / len(examples)
        return scores
