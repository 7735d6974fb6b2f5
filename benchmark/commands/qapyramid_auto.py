"""`sumbench qapyramid semi-auto` and `sumbench qapyramid auto`: automatic QAPyramid.

    sumbench qapyramid semi-auto --dataset FILE --presence BACKEND [options]
        Gold QAs of the dataset (its `QAs`) + a presence backend.
    sumbench qapyramid auto --dataset FILE --qa-model PATH --presence BACKEND
                            --qasem-predicates FILE [options]
        AutoQAPyramid's own QA generation (`--qa-generator qasem`, the default): the QASem
        joint argument parser (official: cattana/flan-t5-xl-qasem-joint-tokenized) on NLTK's
        sentences of each reference, with its input and output formats
        (leaderboard.evaluators.qapyramid.qasem). Its spaCy tokens and predicates are recorded per
        sentence in --qasem-predicates (sumbench runs no spaCy model).
    sumbench qapyramid auto --qa-generator sumbench --dataset FILE --qa-model PATH
                            --presence BACKEND (--predicate-model NAME | --predicates gold|FILE)
                            [--max-new-tokens N] [options]
        sumbench's own generation: a seq2seq model trained on the `qa_generation` format, one
        greedy generation per predicate (leaderboard.evaluators.qapyramid.autoqapyramid). Predicates
        come from a predicate detector (--predicate-model: a token-classification model
        loaded by name, trainers.models.predicate_detector); `--predicates gold` uses the predicate
        words of the example's gold QAs (`gold_predicates`), reported as "oracle
        predicates"; `--predicates FILE` reads a JSON object {example_id: [predicate word,
        ...]} covering every example.

--dataset is the QAPyramid dataset format (tasks.qapyramid.dataset). Options: --presence
lexical|nli|seq2seq|causal-lm|chat; --model (a model folder or hub id; the model name for
chat; required by every backend but lexical); --threshold T (lexical: token recall >= T, 0.5
by default; model backends: probability >= T instead of their own label); --entailment-label
NAME (nli: the class of the model's id2label that means entailment, any case); --use
label|probability (count present QAs, or sum probabilities); --unit-kind qa|statement;
--systems (default: all with a summary); --normalize [--alpha A] (nQAPyramid, alpha 6);
--batch-size, --device, --cache (model backends), --base-url (chat); --out FILE; `auto` with
--qa-generator sumbench: --max-new-tokens per generation (128 by default).

Prints {"systems": {system: QAPyramid}, "n_examples": {system: n}} (examples without QAs are
skipped); with --normalize also "alpha" and "nQAPyramid". When the dataset has `QA_labels`,
also "human" (human QAPyramid: per example the share of QAs labelled present, mean over the
system's labelled examples with a summary), "n_human_examples" and "kendall_tau" (system
level, between the automatic and human means over the examples both score, which are all of
them unless `auto` generated no QAs for some; null when undefined), and with --normalize
"human_nQAPyramid" and "kendall_tau_nQAPyramid", and "examples_without_qas" (scored for no
system: QAPyramid is undefined without QAs; also noted on stderr). --out
also writes the per-example values, the QAs used (auto), "config" and "provenance".
"""
from __future__ import annotations

import json
import math
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from benchmark.commands import positive_int
from benchmark.commands.options import add_option
from benchmark.commands.presence_options import PresenceConfig, add_presence_options
from benchmark.commands.qa_sources import predicate_source, qa_generator
from leaderboard.evaluators.pyramid.presence import PresenceBackend, PresenceResult, build_backend
from leaderboard.evaluators.pyramid.scoring import (
    check_backend_options,
    describe_presence,
    text_backend_names,
)
from leaderboard.evaluators.qapyramid.autoqapyramid import (
    AutoQAPyramid,
    SemiAutoQAPyramid,
    system_means,
)
from leaderboard.evaluators.qapyramid.penalties import DEFAULT_ALPHA, normalize
from leaderboard.evaluators.qapyramid.qasem import BATCH_SIZE, role_labels
from tasks.metrics.correlation import correlation
from tasks.plumbing.errors import DataError, SumbenchError, UnknownNameError, check_choices
from tasks.plumbing.io import write_json
from tasks.plumbing.provenance import provenance
from tasks.qapyramid.dataset import load_examples

PerExample = Mapping[str, Mapping[str, float]]
QA_GENERATORS = ("qasem", "sumbench")
#: the inputs an --out file must not replace (benchmark.commands.out_file)
COMMON_INPUTS = {"dataset": "--dataset file", "model": "--model folder", "cache": "--cache folder"}


def register_subcommands(commands) -> None:
    semi = commands.add_parser("semi-auto", help="QAPyramid with the gold QAs and an automatic "
                               "presence backend")
    _add_common_options(semi)
    semi.set_defaults(handler=run_semi_auto, out_inputs=COMMON_INPUTS)
    auto = commands.add_parser("auto", help="QAPyramid with QAs generated by a seq2seq model "
                               "and an automatic presence backend")
    auto.add_argument("--qa-generator", choices=QA_GENERATORS, default="qasem",
                      help="qasem (default): AutoQAPyramid's QASem joint argument parser and "
                           "its formats; sumbench: a model trained on sumbench's "
                           "qa_generation format, one generation per predicate")
    auto.add_argument("--qa-model", required=True, help="seq2seq model (folder or hub id): "
                      "the QASem joint argument parser (qasem; official: "
                      "cattana/flan-t5-xl-qasem-joint-tokenized) or a qa_generation model "
                      "(sumbench)")
    auto.add_argument("--qasem-predicates", metavar="FILE",
                      help="qasem: the parser's tokens and predicates per sentence, one JSON "
                           "object per line {sentence, tokens, predicates: [{index, lemma, "
                           "pos}]}")
    add_option(auto, "predicate_model")
    auto.add_argument("--predicates", help="sumbench, instead of a detector: 'gold' "
                      "(oracle: the predicate words of the gold QAs) or a JSON file "
                      "{example_id: [predicate, ...]}")
    add_option(auto, "max_new_tokens")
    auto.add_argument("--qa-batch-size", type=positive_int, help="generation batch (qasem: 32, "
                      "as the official run; sumbench: 8)")
    _add_common_options(auto)
    auto.set_defaults(handler=run_auto, out_inputs={
        **COMMON_INPUTS, "qa_model": "--qa-model folder", "predicates": "--predicates file",
        "predicate_model": "--predicate-model folder",
        "qasem_predicates": "--qasem-predicates file"})


def _add_common_options(parser) -> None:
    add_option(parser, "dataset", required=True)
    add_presence_options(parser)
    for kind in ("use", "unit_kind", "systems", "normalize", "alpha", "base_url",
                 "prompt_style"):
        add_option(parser, kind)
    add_option(parser, "out_file")


# ---- presence ----------------------------------------------------------------------------
class ThresholdedBackend(PresenceBackend):
    """Another backend's results, labelled present iff probability >= threshold."""
    name = "thresholded"

    def __init__(self, backend: PresenceBackend, threshold: float):
        self.backend, self.threshold = backend, float(threshold)

    def fingerprint(self) -> str:
        return f"{self.backend.fingerprint()}|threshold={self.threshold!r}"

    def score_iter(self, pairs: Iterable[Sequence[str]]) -> Iterator[PresenceResult]:
        for result in self.backend.score_iter(pairs):
            yield PresenceResult(result.probability, int(result.probability >= self.threshold),
                                 result.details)


def presence_backend(args) -> PresenceBackend:
    """The backend `--presence` names, with --model/--threshold and the model options."""
    config = PresenceConfig.of(args)
    # --threshold applies to every backend here (ThresholdedBackend), so it is not checked
    options = {key: value for key, value in config.options().items() if key != "threshold"}
    check_backend_options(args.presence, options)
    if args.presence == "lexical":
        return build_backend("lexical", threshold=0.5 if args.threshold is None
                             else args.threshold)
    if args.presence == "chat":
        options.update(base_url=args.base_url, prompt_style=args.prompt_style)
    elif args.prompt_style != "task":
        raise SumbenchError("--prompt-style applies to --presence chat only")
    backend = build_backend(args.presence, **options)
    return backend if args.threshold is None else ThresholdedBackend(backend, args.threshold)


# ---- data --------------------------------------------------------------------------------
def load_dataset(args) -> tuple[list, list[str]]:
    """The dataset's examples and the systems to score (checked against the summaries)."""
    if not Path(args.dataset).exists():
        raise DataError("dataset file not found", path=args.dataset)
    examples = load_examples(source=args.dataset)
    known = list(dict.fromkeys(s for example in examples for s in example.system_outputs))
    if not known:
        raise DataError("no system_outputs in the dataset: nothing to score", path=args.dataset)
    chosen = list(dict.fromkeys(args.systems)) if args.systems else known
    try:
        check_choices(chosen, known, "system")
    except UnknownNameError as error:  # named with the dataset it is not in
        raise UnknownNameError(f"{args.dataset}: {error}") from None
    for example in examples:
        missing = [s for s in chosen if not isinstance(example.system_outputs.get(s), str)]
        if missing:
            raise DataError(f"example {example.example_id!r} has no output of system(s) "
                            f"{', '.join(map(repr, missing))}; every system needs a summary "
                            "of every example (use --systems to score fewer systems)",
                            path=args.dataset, field="system_outputs")
    return examples, chosen


def human_per_example(examples: Sequence, systems: Sequence[str]
                      ) -> dict[str, dict[str, float]]:
    """{system: {example_id: mean of QA_labels}} over the examples where the system has
    labels (for at least one QA) and a summary."""
    human: dict[str, dict[str, float]] = {}
    for system in systems:
        for example in examples:
            labels = example.qa_labels.get(system)
            if labels and system in example.labelled_systems:
                human.setdefault(system, {})[example.example_id] = sum(labels) / len(labels)
    return human


def kendall_tau(automatic: PerExample, human: PerExample) -> float | None:
    """System-level Kendall tau of the automatic and human means of each system over the
    examples both score (None when undefined: fewer than 2 systems, or ties all round)."""
    paired = {s: [e for e in human[s] if e in automatic.get(s, {})] for s in human}
    systems = [s for s, shared in paired.items() if shared]
    tau = correlation([sum(automatic[s][e] for e in paired[s]) / len(paired[s])
                       for s in systems],
                      [sum(human[s][e] for e in paired[s]) / len(paired[s]) for s in systems],
                      "kendall")
    return None if math.isnan(tau) else tau


def _normalized(per_example: PerExample, examples: Sequence, alpha: float) -> dict:
    summaries = {(s, ex.example_id): ex.system_outputs[s] for ex in examples
                 for s in per_example if s in ex.system_outputs}
    references = {ex.example_id: ex.reference for ex in examples}
    return normalize(per_example, summaries, references, alpha=alpha)


def _column(table: Mapping, key: str) -> dict[str, dict[str, float]]:
    return {s: {e: row[key] for e, row in rows.items()} for s, rows in table.items()}


# ---- report ------------------------------------------------------------------------------
def build_report(examples: Sequence, systems: Sequence[str], per_example: PerExample,
                 alpha: float | None) -> tuple[dict, dict]:
    """(printed summary, per-example details) for automatic scores `per_example`."""
    if not per_example:
        raise SumbenchError("no summary could be scored: no example of the chosen systems "
                            "has QAs")
    report: dict[str, Any] = {"systems": system_means(per_example),
                              "n_examples": {s: len(rows) for s, rows in per_example.items()}}
    details: dict[str, Any] = {"per_example": per_example}
    human = human_per_example(examples, systems)
    if alpha is not None:
        table = _normalized(per_example, examples, alpha)
        report.update(alpha=alpha, nQAPyramid=system_means(_column(table, "nQAPyramid")))
        details["per_example_normalized"] = table
    if human:
        report.update(human=system_means(human),
                      n_human_examples={s: len(rows) for s, rows in human.items()},
                      kendall_tau=kendall_tau(per_example, human))
        details["human_per_example"] = human
    if human and alpha is not None:
        human_table = _column(_normalized(human, examples, alpha), "nQAPyramid")
        model_table = _column(details["per_example_normalized"], "nQAPyramid")
        report.update(human_nQAPyramid=system_means(human_table),
                      kendall_tau_nQAPyramid=kendall_tau(model_table, human_table))
    return report, details


def without_qas(example_ids: Sequence[str], total: int, which: str) -> list[str]:
    """The examples left out for having no QAs (sorted), noted on stderr: QAPyramid is
    undefined there, so no system is scored on them."""
    if example_ids:
        print(f"sumbench qapyramid: note: {len(example_ids)} of {total} examples have no "
              f"{which} QAs and are scored for no system (first: {sorted(example_ids)[0]!r}; "
              f"all under \"examples_without_qas\")", file=sys.stderr)
    return sorted(example_ids)


def _alpha(args) -> float | None:
    if args.alpha is not None and not args.normalize:
        raise SumbenchError("--alpha needs --normalize")
    if args.alpha is not None and args.alpha <= 0:
        raise SumbenchError(f"--alpha must be positive, got {args.alpha}")
    return (DEFAULT_ALPHA if args.alpha is None else args.alpha) if args.normalize else None


def _config(args, names: Sequence[str]) -> dict:
    return {name: getattr(args, name) for name in names}


COMMON_CONFIG = ("dataset", "presence", "model", "entailment_label", "threshold", "use",
                 "unit_kind", "systems", "normalize", "alpha", "batch_size", "device",
                 "base_url", "prompt_style", "nli_max_length")


def _finish(args, report: dict, details: dict, config: dict) -> int:
    print(json.dumps(report, indent=1))
    if args.out:
        write_json(args.out, {**report, **details, "config": config,
                              "provenance": provenance(config)})
    return 0


def check_text_presence(args) -> None:
    """--presence of a backend that judges text (human labels exist for Pyramid sets only)."""
    if args.presence not in text_backend_names():
        raise SumbenchError(f"--presence {args.presence} needs a Pyramid set's SCU labels (the "
                            f"pyramid command); here: {', '.join(text_backend_names())}")


def run_semi_auto(args) -> int:
    check_text_presence(args)
    alpha = _alpha(args)
    examples, systems = load_dataset(args)
    backend = presence_backend(args)
    evaluator = SemiAutoQAPyramid(backend, args.unit_kind, args.use)
    result = evaluator.score_examples(examples, systems)
    report, details = build_report(examples, systems, result.per_summary, alpha)
    report["examples_without_qas"] = without_qas(
        [example.example_id for example in examples if not example.qas], len(examples), "gold")
    config = {**_config(args, COMMON_CONFIG), "alpha": alpha, "qas": "gold",
              "presence_backend": describe_presence(backend)}
    return _finish(args, report, details, config)


# ---- auto ---------------------------------------------------------------------------------
def run_auto(args) -> int:
    check_text_presence(args)
    alpha = _alpha(args)
    source = predicate_source(args)
    examples, systems = load_dataset(args)
    backend = presence_backend(args)
    evaluator = AutoQAPyramid(qa_generator(args, examples), backend, args.unit_kind, args.use)
    items = [{"example_id": ex.example_id, "reference": ex.reference,
              "summaries": {s: ex.system_outputs[s] for s in systems if s in ex.system_outputs}}
             for ex in examples]
    result = evaluator.score(items)
    if not result.per_summary:
        raise SumbenchError(f"the QA model {args.qa_model} generated no QAs for any reference "
                            f"(predicates: {source}): nothing to score")
    report, details = build_report(examples, systems, result.per_summary, alpha)
    report["examples_without_qas"] = without_qas(
        [e for e, qas in result.qas.items() if not qas], len(examples), "generated")
    report["predicates"] = source
    details["qas"] = {e: [list(pair) for pair in qas] for e, qas in result.qas.items()}
    config = {**_config(args, COMMON_CONFIG + ("qa_generator", "qa_model", "qasem_predicates",
                                               "predicates", "predicate_model",
                                               "max_new_tokens", "qa_batch_size")),
              "alpha": alpha, "predicate_source": source,
              "presence_backend": describe_presence(backend)}
    if args.qa_generator == "qasem":
        config.update(qasem_role_labels=role_labels(), qasem_dtype="float32",
                      qa_batch_size=args.qa_batch_size or BATCH_SIZE)
    return _finish(args, report, details, config)
