"""`sumbench predict`: run a seq2seq model on task data and write prediction files.

    sumbench predict --model M --tasks FAC EXT|all --variant all --split test --data DIR --out OUT

Writes OUT/predictions/<task>.jsonl (the official record shape, ready for `sumbench score`),
OUT/outputs/<task>.jsonl (per-window raw outputs and label probabilities) and
OUT/predict_config.json (spec, model, per-task counts, provenance; written before the first
prediction, `"finished": true` at the end). An interrupted run resumes where it stopped unless
--no-resume is given (see trainers.inference.prediction_io). A folder holds one model's predictions:
predicting other tasks into it adds them, but another model (by content: weights, config and
tokenizer, wherever it was loaded from), variant, split, --limit or an output-changing spec is
refused. A folder copied or moved along with its model is reused, not recomputed.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from benchmark.commands import command_help, positive_int
from benchmark.commands.options import add_option, add_options, given_or_default
from benchmark.encoder_run import predict_command
from tasks import get_task, parse_task_list
from tasks.plumbing.errors import DataError, SumbenchError, json_type
from tasks.plumbing.io import read_json, write_json
from tasks.plumbing.provenance import provenance
from trainers.encoders.pipeline import (
    ENCODER_MODEL,
    ENCODER_RUNS,
    check_profile_fits,
    checkpoint_kind,
    is_encoder_profile,
)
from trainers.inference.generation import resolve_device
from trainers.inference.predict import PredictSpec, load_model, prepared_fingerprint, run_task

SPEC_OPTIONS = ("batch_size", "max_input_tokens", "window_tokens", "max_new_tokens", "num_beams",
                "label_num_beams", "label_rule", "device", "dtype")


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "predict", help=command_help("predict"),
        description="Predict with a seq2seq model (hub id, local folder or LoRA adapter folder) "
                    "or with the fine-tuned encoders of --profile roberta-large (a `sumbench "
                    "train` or `run` folder) and write OUT/predictions/<task>.jsonl in the "
                    "official record shape.")
    add_option(parser, "model", required=True)
    add_option(parser, "revision")
    add_option(parser, "tasks", required=True)
    add_options(parser, "variant", "split", "data")
    add_option(parser, "out_dir", required=True)
    add_options(parser, "spec", "batch_size", "max_input_tokens")
    parser.add_argument("--window-tokens", type=positive_int,
                        help="token budget of one window of windowed tasks (1024; capped at "
                             "--max-input-tokens so no window is truncated)")
    add_options(parser, "max_new_tokens", "num_beams")
    parser.add_argument("--label-num-beams", type=positive_int,
                        help="beams for label tasks (default 1: greedy, as the release)")
    add_options(parser, "label_rule", "device")
    add_option(parser, "profile")  # an encoder profile predicts with fine-tuned encoders
    parser.add_argument("--dtype", choices=("float32", "bfloat16", "float16"))
    parser.add_argument("--no-clean-up-spaces", action="store_true",
                        help="decode without the transformers-4 space clean-up")
    parser.add_argument("--limit", type=positive_int, metavar="N",
                        help="only the first N instances")
    parser.add_argument("--no-resume", action="store_true",
                        help="recompute everything, ignoring partial or finished runs")
    parser.set_defaults(handler=run)


def encoder_profile_of(args: argparse.Namespace) -> str | None:
    """The encoder profile of a prediction: --profile when it is one, or roberta-large for a
    fine-tuned encoder --model given without --profile; None for a seq2seq prediction (a
    seq2seq --profile with an encoder model is refused)."""
    if args.profile is not None:
        check_profile_fits(args.model, args.profile, args.revision)
        return args.profile if is_encoder_profile(args.profile) else None
    kind = checkpoint_kind(args.model, hub=False)
    return "roberta-large" if kind in (ENCODER_MODEL, ENCODER_RUNS) else None


def build_spec(args: argparse.Namespace):
    """PredictSpec from --spec FILE, then the explicit options."""
    fields: dict = spec_file_fields(args.spec) if args.spec else {}
    fields.update({name: getattr(args, name) for name in SPEC_OPTIONS
                   if getattr(args, name) is not None})
    if args.no_clean_up_spaces:
        fields["clean_up_tokenization_spaces"] = False
    return PredictSpec.from_dict(fields)


def spec_file_fields(path: str) -> dict:
    """The PredictSpec fields of a --spec FILE, each checked: a bad file or field is a
    DataError naming the file (and line or field)."""
    fields = read_json(path, what="spec file")
    if not isinstance(fields, dict):
        raise DataError(f"expected a JSON object of PredictSpec fields, got "
                        f"{json_type(fields)}", path=path)
    for name, value in fields.items():
        try:
            PredictSpec.from_dict({name: value})
        except (SumbenchError, TypeError, ValueError) as error:
            raise DataError(str(error), path=path, field=name) from None
    return fields


def run(args: argparse.Namespace) -> int:
    profile = encoder_profile_of(args)
    if profile is not None:  # a fine-tuned RoBERTa per task
        return predict_command(args, profile)
    spec = build_spec(args)
    resolve_device(spec.device)  # a device torch cannot use here fails before anything loads
    names = list(parse_task_list(args.tasks))
    variant, split = given_or_default(args, "variant"), given_or_default(args, "split")
    inputs = {}  # every input is read and checked before the model loads
    for name in names:
        task = get_task(name)
        records = list(task.load(split, variant=variant, data_dir=args.data))
        inputs[name] = (task, task.instances(records)[:args.limit])
    model, tokenizer, info = load_model(args.model, revision=args.revision)
    out = Path(args.out)
    model_print = prepared_fingerprint(model, tokenizer, spec)  # hashed once for all tasks
    config = {"model": info, "model_fingerprint": model_print,
              "spec": spec.to_dict(), "tasks": names, "variant": variant,
              "split": split, "data": args.data, "limit": args.limit}
    record = folder_record(out, config, spec.result_fields())
    for name, (task, instances) in inputs.items():
        write_json(out / CONFIG_FILE, record)  # provenance before any prediction is written
        result = run_task(task, instances, model, tokenizer, spec, out,
                          resume=not args.no_resume, model_info=info, model_print=model_print)
        record["counts"][name] = {"instances": len(instances), **result.counts}
        print(f"{name}: {len(result.records)} records, {json.dumps(result.counts)}",
              file=sys.stderr)
        print(out / "predictions" / f"{name}.jsonl")
    write_json(out / CONFIG_FILE, dict(record, finished=True))
    return 0


CONFIG_FILE = "predict_config.json"
#: what every prediction file of one folder shares (a folder holds one model's predictions):
#: the model by content, not by the path it was loaded from (a moved folder still matches)
FOLDER_IDENTITY = ("model_fingerprint", "variant", "split", "limit")


def folder_record(out: Path, config: dict, result_fields: dict) -> dict:
    """What OUT/predict_config.json will hold: this run's config and provenance, with the
    tasks and counts of earlier runs into the same folder kept (their provenance listed under
    "earlier_runs"). A folder holding another model's, split's or output-changing spec's
    predictions is refused: its files would be scored as one run."""
    record = {"config": config, "counts": {}, "finished": False,
              "provenance": provenance(config), "earlier_runs": []}
    if not (out / CONFIG_FILE).is_file():
        return record
    earlier = read_json(out / CONFIG_FILE, what="predict config")
    before = earlier.get("config") if isinstance(earlier, dict) else None
    if not isinstance(before, dict):
        raise SumbenchError(f"{out / CONFIG_FILE} is not a predict config; predict into "
                            f"another folder")
    differing = [key for key in FOLDER_IDENTITY if before.get(key) != config[key]]
    before_spec = before.get("spec") if isinstance(before.get("spec"), dict) else {}
    changed = [key for key, value in result_fields.items() if before_spec.get(key) != value]
    differing += [f"spec.{key}" for key in changed]
    if differing:
        older = "" if "model_fingerprint" in before else \
            " (it was written by an earlier sumbench, which did not record the model by content)"
        raise SumbenchError(
            f"{out} holds predictions of another run (predict_config.json differs in: "
            f"{', '.join(differing)}){older}; predict into another folder, or delete this one")
    config["tasks"] = list(dict.fromkeys([*before.get("tasks", []), *config["tasks"]]))
    record["counts"] = dict(earlier.get("counts") or {})
    record["earlier_runs"] = [*earlier.get("earlier_runs", []), earlier.get("provenance")]
    return record
