"""Where `sumbench qapyramid auto` gets its QAs: the QASem joint argument parser with
recorded tokens and predicates (`--qa-generator qasem`), or sumbench's own qa_generation model
with predicates from a detector, the gold QAs or a file (`--qa-generator sumbench`)."""
from __future__ import annotations

from collections.abc import Sequence

from benchmark.commands.options import given_or_default
from leaderboard.evaluators.pyramid.presence_models import load_pretrained
from leaderboard.evaluators.qapyramid.autoqapyramid import gold_predicates, seq2seq_qa_generator
from leaderboard.evaluators.qapyramid.qasem import (
    BATCH_SIZE,
    RecordedPredicates,
    as_official_dtype,
    qasem_qa_generator,
)
from tasks.plumbing.errors import DataError, SumbenchError
from tasks.plumbing.io import read_json
from trainers.inference.generation import resolve_device
from trainers.models.predicate_detector import PredicateDetector


def read_predicates(path: str, examples: Sequence) -> dict[str, list[str]]:
    """{example_id: [predicate words]} from a JSON file; every example must be covered."""
    data = read_json(path, what="predicates file")
    if not isinstance(data, dict):
        raise DataError("expected a JSON object {example_id: [predicate, ...]}", path=path)
    for example in examples:
        words = data.get(example.example_id)
        if not isinstance(words, list) or not all(isinstance(w, str) and w.strip()
                                                  for w in words):
            raise DataError("expected a list of predicate words for this example", path=path,
                            field=example.example_id)
    return {example.example_id: data[example.example_id] for example in examples}


def predicate_source(args) -> str:
    """What the predicates are, as results report it."""
    if args.qa_generator == "qasem":
        if args.predicate_model or args.predicates:
            raise SumbenchError("--predicate-model and --predicates are for --qa-generator "
                                "sumbench; qasem reads --qasem-predicates FILE")
        if not args.qasem_predicates:
            raise SumbenchError("--qa-generator qasem needs --qasem-predicates FILE (the "
                                "parser's tokens and predicates per sentence)")
        return f"qasem predicates: {args.qasem_predicates}"
    if args.qasem_predicates:
        raise SumbenchError("--qasem-predicates is for --qa-generator qasem")
    if args.predicate_model and args.predicates:
        raise SumbenchError("give either --predicate-model (a detector) or --predicates, "
                            "not both")
    if args.predicate_model:
        return f"detector: {args.predicate_model}"
    if args.predicates == "gold":
        return "oracle predicates (the gold QAs' predicate words)"
    if args.predicates:
        return f"file: {args.predicates}"
    raise SumbenchError("AutoQAPyramid needs predicates: --predicate-model NAME (a predicate "
                        "detector), or --predicates gold (oracle predicates) or FILE")


def predicate_finder(args, examples: Sequence):
    """`predicates(reference) -> [words]`: the detector's words for the reference, or the
    example's list (--predicates gold or a file) as it is, a word repeated once per
    predicate (gold: `gold_predicates`, one word per predicate group), so the generated QAs
    count each predicate as the gold QAs do. Examples sharing a reference text share the
    first one's list."""
    if args.predicate_model:
        detector = PredicateDetector(args.predicate_model,
                                     device=resolve_device(given_or_default(args, "device")))
        return lambda reference: detector(reference)
    by_example = ({ex.example_id: gold_predicates(ex) for ex in examples}
                  if args.predicates == "gold" else read_predicates(args.predicates, examples))
    by_reference: dict[str, list[str]] = {}
    for example in examples:
        by_reference.setdefault(example.reference, list(by_example[example.example_id]))
    return lambda reference: list(by_reference.get(reference, []))


#: the batch of sumbench's own QA generation (QASem's: its official 32)
SUMBENCH_QA_BATCH = 8
#: tokens per generation of a sumbench qa_generation model (--max-new-tokens when not given;
#: qasem generates up to its parser's max_length 256)
SUMBENCH_QA_NEW_TOKENS = 128


def qa_generator(args, examples: Sequence):
    device = resolve_device(given_or_default(args, "device"))
    parses = None
    if args.qa_generator == "qasem":
        parses = RecordedPredicates(args.qasem_predicates)
    else:
        predicates = predicate_finder(args, examples)
    try:
        model, tokenizer, _ = load_pretrained(args.qa_model, None, "AutoModelForSeq2SeqLM", None)
    except SumbenchError as error:
        raise SumbenchError(f"--qa-model: {error}") from None
    if parses is not None:
        return qasem_qa_generator(as_official_dtype(model).to(device), tokenizer,
                                  parses, batch_size=args.qa_batch_size or BATCH_SIZE)
    return seq2seq_qa_generator(model.to(device), tokenizer, predicates,
                                max_new_tokens=args.max_new_tokens or SUMBENCH_QA_NEW_TOKENS,
                                batch_size=args.qa_batch_size or SUMBENCH_QA_BATCH)
