"""Encoder runs: `sumbench run|train|predict --profile roberta-large` (USB Table 2's
RoBERTa-Large rows) on FAC, EVEXT, EXT and UNSUP, one fine-tuned RoBERTa per task
(trainers.encoders.pipeline).

A run writes what a seq2seq run writes, so `sumbench score DIR/predictions/*.jsonl` reads it:
  run_spec.json, data/ (--raw)    as benchmark.run
  train/<task>/                   train_log.jsonl, train_result.json, best/ (the best epoch's
                                  model by the task's Table 2 metric on the validation split)
  predictions/<task>.jsonl        the official prediction records of the split
  results.json                    scores, table, predictions, models, training (the encoder
                                  spec of each task), provenance
`--training per-task` is the only training (the four tasks have different heads);
`--training none` predicts with a folder already fine-tuned (a `sumbench train` or `run`
folder, or one model folder). A finished task's training is reused when a run is resumed; an
unfinished one starts over.
"""
from __future__ import annotations

import dataclasses
import json
import shutil
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from benchmark.commands.options import given_or_default, training_device
from benchmark.results import RunSpec, build_results, prediction_entries, write_results
from benchmark.run import (
    Log,
    canonical_spec,
    predictions_path,
    prepare_data,
    prepare_out_dir,
    run_seeds,
    stderr_log,
)
from tasks import get_task, parse_task_list
from tasks.plumbing.errors import DataError, SumbenchError, json_type
from tasks.plumbing.io import read_json, write_json, write_jsonl
from tasks.plumbing.provenance import provenance
from tasks.scoring import score_files
from trainers.encoders.heads import TASK_MODELS
from trainers.encoders.pipeline import (
    check_profile_fits,
    predict_task,
    train_task,
    trained_folder,
    trained_spec,
)
from trainers.encoders.resume import RESUME_FOLDER, STATE_FILE
from trainers.encoders.spec import ENCODER_PROFILES, EncoderSpec, encoder_spec, encoder_task_name
from trainers.encoders.training import BEST_FOLDER, RESULT_FILE
from trainers.inference.generation import resolve_device

EXT = "extractive_summarization"
#: spec fields only EXT's spec takes (`--set` gives them to EXT when several tasks run)
EXT_ONLY_FIELDS = ("long_articles",)
#: spec fields no option may set (the run decides them)
FIXED_FIELDS = ("profile", "task", "model")
#: a training option that is not a spec field but goes to the trainer
MICROBATCH = "tokens_per_microbatch"
#: prediction batch of `sumbench predict` and `train`'s validation scoring by default
DEFAULT_BATCH = 32


# ---- specs ---------------------------------------------------------------------------------
def _parse(name: str, value: Any) -> Any:
    """A spec field's value from a command line string, by the field's type."""
    kind = {item.name: str(item.type) for item in dataclasses.fields(EncoderSpec)}[name]
    if not isinstance(value, str):
        return value
    text = value.strip()
    try:
        if "None" in kind and text.lower() in ("none", "null"):
            return None
        if kind.startswith("tuple"):
            return tuple(float(part) for part in text.split(",") if part.strip())
        if kind.startswith("int"):
            return int(text)
        if kind.startswith("float"):
            return float(text)
    except ValueError:
        raise SumbenchError(f"encoder spec field '{name}' expects {kind}, got {value!r}") from None
    return text


def split_overrides(overrides: Mapping[str, Any] | Sequence[tuple[str, Any]]
                    ) -> tuple[dict[str, Any], int | None]:
    """(encoder spec fields, tokens per micro-batch) from `--set` and the training options;
    a name that is no encoder spec field is refused in one line."""
    pairs = overrides.items() if isinstance(overrides, Mapping) else overrides
    names = [item.name for item in dataclasses.fields(EncoderSpec)
             if item.name not in FIXED_FIELDS]
    values, budget = {}, None
    for name, value in pairs:
        if name == MICROBATCH:
            budget = None if value in (None, "auto", "none") else int(value)
            continue
        if name not in names:
            raise SumbenchError(f"{name} is not a field of the encoder spec (profiles "
                                f"{', '.join(ENCODER_PROFILES)}); choose one of "
                                f"{', '.join(names)}")
        values[name] = _parse(name, value)
    return values, budget


def task_specs(profile: str, tasks: Sequence[str], model: str, seed: int | None,
               overrides: Mapping[str, Any] | Sequence[tuple[str, Any]] = ()
               ) -> dict[str, EncoderSpec]:
    """{task: its encoder spec}: the profile's Table 10 row, the model and seed, then the
    overrides (EXT's own fields to EXT only). A task no encoder profile runs is refused in
    one line."""
    folders = [encoder_task_name(name) for name in tasks]
    values, _ = split_overrides(overrides)
    if seed is not None:
        values = {"seed": int(seed), **values}
    given = [name for name in EXT_ONLY_FIELDS if name in values]
    if given and EXT not in folders:
        raise SumbenchError(f"{given[0]} is an EXT setting, and --tasks has no EXT")
    return {folder: encoder_spec(profile, folder, model=model, **{
        name: value for name, value in values.items()
        if folder == EXT or name not in EXT_ONLY_FIELDS}) for folder in folders}


def specs_json(specs: Mapping[str, EncoderSpec]) -> str:
    return json.dumps({task: spec.to_dict() for task, spec in specs.items()}, indent=2)


def check_run_spec(spec: RunSpec) -> dict[str, EncoderSpec]:
    """The encoder specs of a run, after refusing (one line) what an encoder run cannot do."""
    if spec.mode != "finetune":
        raise SumbenchError(f"--profile {spec.profile} fine-tunes an encoder: use --mode "
                            f"finetune")
    if spec.training not in ("per-task", "none"):
        raise SumbenchError(f"--training {spec.training}: encoder profiles train one model "
                            f"per task (FAC, EVEXT, EXT and UNSUP have different heads); use "
                            f"--training per-task, or none to predict with trained models")
    if spec.lora:
        raise SumbenchError("--lora: encoder profiles fine-tune every weight")
    if spec.early_stopping == "loss":
        raise SumbenchError("--early-stopping loss: encoder runs keep the epoch with the best "
                            "validation metric (metric) or the last one (none)")
    return task_specs(spec.profile, spec.tasks, spec.model, spec.seed, spec.train_overrides)


# ---- one task's training -------------------------------------------------------------------
def finished_training(folder: Path, spec: EncoderSpec) -> bool:
    """Whether `folder` holds a finished training of `spec` (a different one is refused)."""
    result = folder / RESULT_FILE
    if not result.is_file() or not (folder / BEST_FOLDER).is_dir():
        return False
    earlier = read_json(result, what="training result").get("spec")
    if earlier != spec.to_dict():
        raise SumbenchError(f"{folder} holds a training with another spec; choose another "
                            f"output folder")
    return True


def train_one(spec: EncoderSpec, data_dir: str | None, variant: str, folder: Path, *,
              revision: str | None, device: str, batch_size: int, budget: int | None,
              select: bool, resume: bool, log: Log) -> Path:
    """Fine-tune one task into `folder` (reusing a finished training of the same spec when
    resuming); returns its best/ folder."""
    if resume and finished_training(folder, spec):
        log(f"training: finished run found in {folder}, skipping")
        return folder / BEST_FOLDER
    saved = resume and (folder / RESUME_FOLDER / STATE_FILE).is_file()
    if saved:
        log(f"training: resuming the interrupted training in {folder}")
    elif resume and folder.exists():
        log(f"training: {folder} holds an unfinished training that saved no state; starting "
            f"it over")
        shutil.rmtree(folder)
    task = get_task(spec.task)
    train = list(task.load("train", variant, data_dir))
    validation = list(task.load("validation", variant, data_dir)) if select else None
    log(f"training: fine-tuning {spec.model} ({TASK_MODELS[spec.task]}) on {spec.task} in "
        f"{folder}")
    return train_task(spec, spec.model, train, validation, folder, revision=revision,
                      device=device, batch_size=batch_size, tokens_per_microbatch=budget,
                      resume=saved)


def training_record(folder: Path, spec: EncoderSpec) -> dict:
    result = folder / RESULT_FILE
    return {"tasks": [spec.task], "spec": spec.to_dict(), "model": TASK_MODELS[spec.task],
            "result": read_json(result) if result.is_file() else None}


# ---- sumbench run ----------------------------------------------------------------------------
def run_encoder_benchmark(spec: RunSpec, out_dir: str | Path, *, resume: bool = False,
                          extra_config: dict | None = None, log: Log = stderr_log) -> dict:
    """`benchmark.run.run_benchmark` of an encoder profile: every check before DIR is
    written, then per task train (or find the trained model), predict, and score."""
    out = Path(out_dir).resolve()
    spec = canonical_spec(spec)
    specs = check_run_spec(spec)
    check_profile_fits(spec.model, spec.profile, spec.revision)
    trained = {task: trained_folder(spec.model, task) for task in specs} \
        if spec.training == "none" else {}
    resolve_device(spec.device)
    _, budget = split_overrides(spec.train_overrides)
    resume = prepare_out_dir(spec, out, resume)
    data_dir = prepare_data(spec, out, log)
    tests = {}
    for task_name in specs:
        tests[task_name] = list(get_task(task_name).load(spec.split, spec.variant, data_dir))
        if not tests[task_name]:
            raise SumbenchError(f"task {task_name} has no {spec.split} records in variant "
                                f"{spec.variant} ({data_dir or 'default data location'})")
    training, models, paths = {}, {}, {}
    for task_name, task_spec in list(specs.items()):
        if spec.training == "per-task":
            folder = out / "train" / task_name
            best = train_one(task_spec, data_dir, spec.variant, folder, revision=spec.revision,
                             device=spec.device, batch_size=spec.batch_size, budget=budget,
                             select=spec.early_stopping == "metric", resume=resume, log=log)
            training[folder.relative_to(out).as_posix()] = training_record(folder, task_spec)
        else:
            best = trained[task_name]
            task_spec = trained_spec(best) or task_spec
        specs[task_name] = task_spec  # the spec it predicted with
        records = predict_task(task_spec, best, tests[task_name], device=spec.device,
                               batch_size=spec.batch_size)
        write_jsonl(out / "predictions" / f"{task_name}.jsonl", records)
        log(f"predict {task_name}: {len(records)} records")
        models[task_name] = {"model": spec.model, "revision": spec.revision,
                             "checkpoint": _shown(best, out), "head": TASK_MODELS[task_name],
                             "profile": spec.profile}
        paths[task_name] = predictions_path(out, task_name)
    log("scoring " + ", ".join(paths))
    scores = score_files([str(paths[name]) for name in specs], bootstrap=spec.bootstrap,
                         seed=spec.seed, options={"rouge_aggregate": spec.rouge_aggregate,
                                                  "rouge_seed": spec.seed})
    config = {**dict(extra_config or {}), "data_dir": data_dir,
              "encoder_specs": {task: value.to_dict() for task, value in specs.items()}}
    results = build_results(spec, scores, predictions=prediction_entries(out, paths, scores),
                            models=models, training=training or None, config=config,
                            seeds=run_seeds(spec))
    results["decoding"] = None  # probabilities of the heads: no decoding
    write_results(out, results)
    return results


def _shown(path: Path, out: Path) -> str:
    """A path relative to the run folder when inside it."""
    path = Path(path).resolve()
    return path.relative_to(out).as_posix() if path.is_relative_to(out) else str(path)


# ---- sumbench train ------------------------------------------------------------------------
def train_command(args, profile: str) -> int:
    """`sumbench train` with an encoder profile: OUT/<task>/ per task."""
    for flag, value in (("--lora", args.lora), ("--mixing", args.mixing),
                        ("--compile", args.compile)):
        if value:
            raise SumbenchError(f"{flag} is a seq2seq fine-tuning option; encoder profiles "
                                f"({', '.join(ENCODER_PROFILES)}) do not take it")
    if args.early_stopping == "loss":
        raise SumbenchError("--early-stopping loss: encoder runs keep the epoch with the best "
                            "validation metric (metric) or the last one (none)")
    tasks = parse_task_list(args.tasks)
    device = training_device(args)
    model = args.model or ENCODER_PROFILES[profile]
    overrides = list(read_spec_fields(args.spec).items()) if args.spec else []
    overrides += [(name, value) for name, value in (("train_fraction", args.train_fraction),
                                                    ("max_steps", args.max_steps))
                  if value is not None]
    overrides += list(args.overrides)
    if args.tokens_per_microbatch is not None:
        overrides.append((MICROBATCH, args.tokens_per_microbatch))
    specs = task_specs(profile, tasks, model, args.seed, overrides)
    if args.print_spec:
        print(specs_json(specs))
        return 0
    check_profile_fits(model, profile, args.revision)
    _, budget = split_overrides(overrides)
    out, variant = Path(args.out), given_or_default(args, "variant")
    if not args.resume:
        taken = [task for task in specs if (out / task).exists()]
        if taken:
            raise SumbenchError(f"{out / taken[0]} exists; pass --resume to continue, or "
                                f"choose another output folder")
    trained = {}
    for task, spec in specs.items():
        best = train_one(spec, args.data, variant, out / task, revision=args.revision,
                         device=device, batch_size=DEFAULT_BATCH, budget=budget,
                         select=(args.early_stopping or "metric") == "metric",
                         resume=args.resume, log=_command_log("train"))
        trained[task] = best.relative_to(out).as_posix()
        print(best)
    write_trained_folder(out, specs, trained, variant)
    return 0


def write_trained_folder(out: Path, specs: Mapping[str, EncoderSpec], trained: dict[str, str],
                         variant: str) -> None:
    """OUT/train_result.json once every task is trained: the folder's models by task (what
    `run --training none --model OUT` predicts with; those of earlier commands into OUT
    kept), their specs, and provenance. `final` is the folder itself, as experiments read
    it."""
    earlier = read_json(out / RESULT_FILE) if (out / RESULT_FILE).is_file() else {}
    if not isinstance(earlier, dict) or earlier.get("kind") != "encoder":
        earlier = {}
    models = {**(earlier.get("models") or {}), **trained}
    config = {"kind": "encoder", "variant": variant,
              "specs": {**(earlier.get("specs") or {}),
                        **{task: spec.to_dict() for task, spec in specs.items()}}}
    write_json(out / RESULT_FILE, {"kind": "encoder", "final": ".", "models": models,
                                   "specs": config["specs"], "provenance": provenance(config)})


def read_spec_fields(path: str) -> dict:

    values = read_json(path, what="spec file")
    if not isinstance(values, dict):
        raise DataError(f"expected a JSON object of encoder spec fields, got "
                        f"{json_type(values)}", path=path)
    return values


def _command_log(command: str) -> Log:
    def log(message: str) -> None:
        print(f"sumbench {command}: {message}", file=sys.stderr, flush=True)

    return log


# ---- sumbench predict ----------------------------------------------------------------------
#: predict options of the seq2seq path (an encoder prediction refuses them)
SEQ2SEQ_PREDICT_OPTIONS = ("spec", "max_input_tokens", "window_tokens", "max_new_tokens",
                           "num_beams", "label_num_beams", "label_rule", "dtype")
CONFIG_FILE = "predict_config.json"


def predict_command(args, profile: str) -> int:
    """`sumbench predict` with an encoder profile (or an encoder model folder): per task the
    trained model of --model, OUT/predictions/<task>.jsonl and OUT/predict_config.json."""
    given = [name for name in SEQ2SEQ_PREDICT_OPTIONS if getattr(args, name, None) is not None]
    if args.no_clean_up_spaces:
        given.append("no_clean_up_spaces")
    if given:
        raise SumbenchError(f"--{given[0].replace('_', '-')} is a seq2seq prediction option; "
                            f"encoder profiles ({', '.join(ENCODER_PROFILES)}) do not take it")
    device = resolve_device(given_or_default(args, "device"))
    check_profile_fits(args.model, profile, args.revision)
    variant, split = given_or_default(args, "variant"), given_or_default(args, "split")
    jobs = {}
    for name in parse_task_list(args.tasks):
        task = encoder_task_name(name)
        folder = trained_folder(args.model, task)
        spec = trained_spec(folder) or encoder_spec(profile, task, model=str(args.model))
        records = list(get_task(task).load(split, variant=variant, data_dir=args.data))
        jobs[task] = (folder, spec, records[:args.limit])
    out = Path(args.out)
    config = {"model": str(Path(args.model).resolve()) if Path(args.model).exists()
              else args.model, "profile": profile, "tasks": list(jobs), "variant": variant,
              "split": split, "data": args.data, "limit": args.limit,
              "specs": {task: spec.to_dict() for task, (_, spec, _) in jobs.items()}}
    record = {"config": config, "counts": {}, "finished": False,
              "provenance": provenance(config)}
    if (out / CONFIG_FILE).is_file():
        before = read_json(out / CONFIG_FILE, what="predict config").get("config") or {}
        differing = [key for key in ("model", "variant", "split", "limit")
                     if before.get(key) != config[key]]
        if differing:
            raise SumbenchError(f"{out} holds predictions of another run (predict_config.json "
                                f"differs in: {', '.join(differing)}); predict into another "
                                f"folder, or delete this one")
    batch = args.batch_size or DEFAULT_BATCH
    for task, (folder, spec, records) in jobs.items():
        write_json(out / CONFIG_FILE, record)
        built = predict_task(spec, folder, records, device=device, batch_size=batch)
        write_jsonl(out / "predictions" / f"{task}.jsonl", built)
        record["counts"][task] = {"records": len(records), "predictions": len(built),
                                  "checkpoint": str(folder)}
        print(f"{task}: {len(built)} records", file=sys.stderr)
        print(out / "predictions" / f"{task}.jsonl")
    write_json(out / CONFIG_FILE, dict(record, finished=True))
    return 0
