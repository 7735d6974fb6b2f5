"""`sumbench run` orchestration: data -> (fine-tune) -> predict -> score -> DIR/results.json.

Stages and their files under the output folder DIR:
  run_spec.json                the RunSpec (a resumed run must match its result fields)
  data/                        task datasets derived from a raw folder (when --raw is given)
  train/ or train/<task>/      trainers.finetuning.finetune output (finetune mode; multitask /
  per-task)
  predictions/<task>.jsonl     official prediction records (what `sumbench score` reads)
  outputs/<task>.*             per-window / per-prompt outputs of the runners
  cache/responses.sqlite       few-shot response cache
  results.json                 benchmark.results, written last and atomically

Resuming (`resume=True`, same DIR): a finished training run is skipped, an interrupted one
continues from its last checkpoint, finished predictions are reused and interrupted ones
continue (the runners fingerprint model, inputs and settings); scoring is always redone.
Only the Task interface and the runners' public functions are used here.
"""
from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmark.results import RunSpec, build_results, prediction_entries, write_results
from tasks import canonical_task_name, get_task
from tasks.plumbing.atomic import atomic_path
from tasks.plumbing.errors import SumbenchError
from tasks.plumbing.io import read_json, write_jsonl
from tasks.scoring import score_files
from tasks.usb.derive import build_task_datasets, reusable_build
from trainers.encoders.pipeline import check_profile_fits
from trainers.fewshot.backends import load_hf_backend
from trainers.fewshot.chat_backend import chat_backend
from trainers.fewshot.official import official_predict
from trainers.fewshot.prompts import OFFICIAL_GPT35_STYLE
from trainers.fewshot.runner import context_window, fewshot_predict
from trainers.finetuning.checkpoints import finished_output
from trainers.finetuning.evaluation import early_stopping_fn, validation_predict_spec
from trainers.finetuning.finetune import finetune
from trainers.finetuning.profiles import get_profile, prediction_budgets
from trainers.inference.generation import resolve_device
from trainers.inference.predict import load_model, prepared_fingerprint, run_task

RUN_SPEC_FILE = "run_spec.json"
#: entries of DIR that only a run writes (a fresh run refuses a folder holding them)
RUN_OUTPUTS = ("results.json", "train", "predictions", "outputs")
DEFAULT_STYLES = {"hf-seq2seq": "flan-t5", "hf-causal": "llama", "openai": "gpt-3.5"}

Log = Callable[[str], None]


def stderr_log(message: str) -> None:
    print(f"sumbench run: {message}", file=sys.stderr, flush=True)


@dataclass
class RunState:
    """What the stages found out, collected for the results file."""
    spec: RunSpec
    out_dir: Path
    data_dir: str | None
    log: Log
    models: dict[str, Any] = field(default_factory=dict)
    training: dict[str, Any] | None = None
    fewshot: dict[str, Any] | None = None
    config: dict[str, Any] = field(default_factory=dict)


# ---- the whole run -----------------------------------------------------------------------

def run_benchmark(spec: RunSpec, out_dir: str | Path, *, resume: bool = False,
                  extra_config: dict | None = None, log: Log = stderr_log) -> dict:
    """Run every stage and write DIR/results.json; returns the results document. (An encoder
    profile's run is benchmark.encoder_run.run_encoder_benchmark's.)"""
    out = Path(out_dir).resolve()
    spec = canonical_spec(spec)
    fspec = finetune_spec(spec) if spec.mode == "finetune" else None  # bad values fail here
    if fspec is not None:  # a RoBERTa folder is refused before DIR is written
        check_profile_fits(spec.model, spec.profile, spec.revision)
    if spec.mode == "finetune" or spec.fewshot_backend != "openai":
        resolve_device(spec.device)  # and a device torch cannot use here (a model runs here)
    resume = prepare_out_dir(spec, out, resume)
    state = RunState(spec, out, prepare_data(spec, out, log), log,
                     config=dict(extra_config or {}))
    tasks = [get_task(name) for name in spec.tasks]
    test = {task.name: load_instances(task, spec.split, spec, state.data_dir) for task in tasks}
    if fspec is not None:
        paths = run_finetune_mode(state, fspec, tasks, test, resume)
    else:
        paths = run_fewshot_mode(state, tasks, test)
    log("scoring " + ", ".join(paths))
    scores = score_files([str(paths[name]) for name in spec.tasks], bootstrap=spec.bootstrap,
                         seed=spec.seed, options={"rouge_aggregate": spec.rouge_aggregate,
                                                  "rouge_seed": spec.seed})
    results = build_results(
        spec, scores, predictions=prediction_entries(out, paths, scores), models=state.models,
        training=state.training, fewshot=state.fewshot,
        config={**state.config, "data_dir": state.data_dir}, seeds=run_seeds(spec))
    write_results(out, results)
    return results


def canonical_spec(spec: RunSpec) -> RunSpec:
    """The spec with registered task names in place of aliases."""
    return dataclasses.replace(
        spec, tasks=tuple(canonical_task_name(name) for name in spec.tasks),
        train_tasks=tuple(canonical_task_name(name) for name in spec.train_tasks))


def run_seeds(spec: RunSpec) -> dict[str, int]:
    seeds = {"seed": spec.seed}
    if spec.mode == "finetune" and spec.training != "none":
        seeds["training"] = int(dict(spec.train_overrides).get("seed", spec.seed))
    if spec.mode == "fewshot":
        seeds["shots"] = spec.seed
    if spec.bootstrap:
        seeds["bootstrap"] = spec.seed
    return seeds


def prepare_out_dir(spec: RunSpec, out: Path, resume: bool) -> bool:
    """Check DIR against an earlier run (resume) or refuse one that holds a finished or a
    different run; write the spec. Returns whether the run continues an earlier one (an
    unfinished identical run is continued without --resume: a failed run never blocks its
    own retry)."""
    spec_path = out / RUN_SPEC_FILE
    if spec_path.is_file():
        try:
            earlier = RunSpec.from_json(spec_path.read_text(encoding="utf-8"))
        except (SumbenchError, ValueError, TypeError) as error:
            raise SumbenchError(f"{spec_path}: unreadable run spec ({error})") from None
        changed = spec.differences(earlier)
        unfinished = not (out / "results.json").is_file()
        if not resume and not (unfinished and not changed):
            raise SumbenchError(f"{out} already holds a run; pass --resume to continue it or "
                                f"choose another output folder")
        if changed:
            raise SumbenchError(f"cannot resume {out}: the run used a different "
                                f"{', '.join(changed)}")
        if not resume:  # the same run stopped early: retrying it simply continues it
            print(f"sumbench run: continuing the unfinished identical run in {out}",
                  file=sys.stderr)
        resume = True
    elif out.exists():
        if not out.is_dir():
            raise SumbenchError(f"{out} exists and is not a folder")
        foreign = [name for name in RUN_OUTPUTS if (out / name).exists()]
        if foreign:
            raise SumbenchError(f"{out} holds {', '.join(foreign)} but no {RUN_SPEC_FILE}; "
                                f"choose another output folder")

    out.mkdir(parents=True, exist_ok=True)
    with atomic_path(spec_path) as tmp:
        Path(tmp).write_text(spec.to_json() + "\n", encoding="utf-8")
    return resume


def prepare_data(spec: RunSpec, out: Path, log: Log) -> str | None:
    """The task-dataset folder: --data as given, or DIR/data derived from --raw."""
    if not spec.raw_dir:
        return spec.data_dir

    data = out / "data"
    if reusable_build(data, spec.raw_dir, [spec.variant]):
        log(f"data: reusing {data}")
        return str(data)
    log(f"data: deriving the task datasets of {spec.raw_dir} into {data}")
    build_task_datasets(spec.raw_dir, data, variants=[spec.variant])
    return str(data)


def load_instances(task, split: str, spec: RunSpec, data_dir: str | None) -> list[dict]:
    instances = task.instances(task.load(split, spec.variant, data_dir))
    if not instances:
        raise SumbenchError(f"task {task.name} has no {split} instances in variant "
                            f"{spec.variant} ({data_dir or 'default data location'})")
    return instances


# ---- fine-tuning mode ----------------------------------------------------------------------

def finetune_spec(spec: RunSpec):
    """The FinetuneSpec of the run: the profile, the run's model/seed/variant/LoRA, then the
    explicit overrides (strings parsed by field type, as `sumbench train --set`)."""
    values = {"model": spec.model, "revision": spec.revision, "variant": spec.variant,
              "seed": spec.seed}
    if spec.lora:
        values["lora"] = True
    return get_profile(spec.profile).override(values).override(dict(spec.train_overrides))


def training_groups(spec: RunSpec, out: Path) -> list[tuple[Path, tuple[str, ...]]]:
    """(training folder, tasks) per model to train."""
    if spec.training == "none":
        return []
    if spec.training == "multitask":
        return [(out / "train", spec.trained_tasks)]
    return [(out / "train" / name, (name,)) for name in spec.tasks]


def run_finetune_mode(state: RunState, fspec, tasks: Sequence[Any],
                      test: dict[str, list[dict]], resume: bool) -> dict[str, Path]:
    """Train as the spec says, then predict every task with the model meant for it."""
    spec, out = state.spec, state.out_dir
    groups = training_groups(spec, out)
    pspec = predict_spec(spec, fspec)      # its budgets are checked before training
    trained = {}
    state.training = {}
    for folder, names in groups:
        final = train_stage(fspec, names, state.data_dir, folder, spec.early_stopping,
                            resume, state.log, spec.device,
                            (pspec.max_input_tokens, pspec.max_new_tokens))
        state.training[folder.relative_to(out).as_posix()] = training_record(folder, names)
        trained.update({name: final for name in names})
    state.config["finetune_spec"] = fspec.to_dict()
    if spec.training == "multitask":
        checkpoint_of = {task.name: trained[spec.trained_tasks[0]] for task in tasks}
    else:
        checkpoint_of = {task.name: trained.get(task.name) for task in tasks}
    state.config["predict_spec"] = pspec.to_dict()
    return predict_stage(state, tasks, test, checkpoint_of, pspec)


def train_stage(fspec, task_names: Sequence[str], data_dir: str | None, folder: Path,
                early_stopping: str, resume: bool, log: Log, device: str = "auto",
                prediction_budgets: tuple[int, int] | None = None) -> Path:
    """Fine-tune on `device` (or continue, or skip a finished run of the same spec, tasks and
    training data: one with other settings or changed data is refused; the prediction that
    follows, with `prediction_budgets`, is checked before the first step); returns the
    model/adapter folder."""
    evaluate_fn = early_stopping_fn(early_stopping, fspec, task_names, data_dir)
    final = finished_output(folder, fspec, list(task_names), data_dir, evaluate_fn)
    if final is not None:
        log(f"training: finished run found in {folder}, skipping")
        return final
    continuing = resume and (folder / "train_config.json").is_file()
    log(f"training: {'resuming' if continuing else 'fine-tuning'} {fspec.model} on "
        f"{', '.join(task_names)} in {folder}")
    return Path(finetune(fspec, list(task_names), data_dir=data_dir, out_dir=folder,
                         evaluate_fn=evaluate_fn, resume=continuing, device=device,
                         prediction_budgets=prediction_budgets))


def training_record(folder: Path, task_names: Sequence[str]) -> dict:
    """The training folder's fine-tuning spec, result and config summary, for results.json."""
    def read(name: str) -> Any:
        path = folder / name
        return read_json(path) if path.is_file() else None

    config = read("train_config.json") or {}
    settings = config.get("config", {})
    resumes = [{"step": resumed.get("step"), "git": resumed.get("provenance", {}).get("git")}
               for resumed in config.get("resumes", [])]
    return {"tasks": list(task_names), "spec": settings.get("spec"),
            "result": read("train_result.json"), "model": settings.get("model"),
            "total_steps": settings.get("total_steps"), "git": config.get("git"),
            "resumes": resumes}


def predict_spec(spec: RunSpec, fspec):
    """Prediction settings: the windows the model was trained on (those of validation
    predictions), the input and output budgets of `trainers.finetuning.profiles.prediction_budgets`
    (the USB release's 8192 and 767 for its profiles) unless the run overrides them, and
    the run's decoding."""
    trained = validation_predict_spec(fspec, spec.device)
    max_input, max_new = prediction_budgets(fspec)
    return dataclasses.replace(
        trained, batch_size=spec.batch_size, window_tokens=fspec.window_budget,
        max_input_tokens=spec.max_input_tokens or max_input,
        max_new_tokens=spec.max_new_tokens or max_new,
        num_beams=spec.num_beams, label_rule=spec.label_rule)


def predict_stage(state: RunState, tasks: Sequence[Any], test: dict[str, list[dict]],
                  checkpoint_of: dict[str, Path | None], pspec) -> dict[str, Path]:
    """Predict each task (one model load per distinct checkpoint); resumable per task."""
    from tqdm.auto import tqdm

    paths, loaded = {}, {}
    spec = state.spec
    for task in tqdm(tasks, desc="tasks", unit="task", disable=None, file=sys.stderr):
        checkpoint = checkpoint_of[task.name]
        source = str(checkpoint) if checkpoint is not None else spec.model
        if source not in loaded:
            loaded.clear()  # one model in memory at a time
            model, tokenizer, info = load_model(source, None if checkpoint else spec.revision)
            loaded[source] = model, tokenizer, info, prepared_fingerprint(model, tokenizer, pspec)
        model, tokenizer, info, model_print = loaded[source]
        state.models[task.name] = info
        result = run_task(task, test[task.name], model, tokenizer, pspec, state.out_dir,
                          resume=True, model_info=info, model_print=model_print)
        counts = result.counts
        state.log(f"predict {task.name}: {len(result.records)} records "
                  f"({counts.get('computed', 0)} windows computed, "
                  f"{counts.get('windows', 0) - counts.get('computed', 0)} reused)")
        paths[task.name] = predictions_path(state.out_dir, task.name)
    return paths


def predictions_path(out: Path, task_name: str) -> Path:
    path = out / "predictions" / f"{task_name}.jsonl"
    if not path.is_file():
        raise SumbenchError(f"the runner wrote no prediction file for {task_name} ({path})")
    return path


# ---- few-shot mode ---------------------------------------------------------------------------

def make_backend(spec: RunSpec, out: Path):
    """The few-shot backend, with its response cache in DIR/cache."""
    cache = str(out / "cache" / "responses.sqlite")
    if spec.fewshot_backend == "openai":
        return chat_backend(spec.model, base_url=spec.base_url, cache=cache,
                            endpoint=spec.openai_api, workers=spec.max_concurrency,
                            top_logprobs=spec.top_logprobs)

    model_type = "causal" if spec.fewshot_backend == "hf-causal" else "seq2seq"
    return load_hf_backend(spec.model, model_type=model_type, revision=spec.revision,
                           cache=cache, batch_size=spec.batch_size, device=spec.device)


def run_fewshot_mode(state: RunState, tasks: Sequence[Any],
                     test: dict[str, list[dict]]) -> dict[str, Path]:
    """Few-shot predictions of every task, shots drawn from the train split."""
    from tqdm.auto import tqdm

    spec = state.spec
    backend = make_backend(spec, state.out_dir)
    style = spec.style or DEFAULT_STYLES[spec.fewshot_backend]
    if style == OFFICIAL_GPT35_STYLE:
        return run_official_fewshot(state, tasks, backend)
    state.config["fewshot"] = {"backend": spec.fewshot_backend, "style": style,
                               "fingerprint": backend.fingerprint(),
                               "context_window": context_window(backend)}
    model_info = fewshot_model_info(spec, backend)
    state.fewshot, paths = {}, {}
    for task in tqdm(tasks, desc="tasks", unit="task", disable=None, file=sys.stderr):
        train = load_instances(task, "train", spec, state.data_dir)
        _, report = fewshot_predict(
            task, test[task.name], train, backend, style, seed=spec.seed, n_shots=spec.n_shots,
            out_dir=str(state.out_dir), max_prompt_tokens=spec.max_prompt_tokens,
            max_new_tokens=spec.max_new_tokens, resume=True,
            label_reading=spec.label_reading)
        state.fewshot[task.name] = report
        state.models[task.name] = dict(model_info)
        state.log(f"few-shot {task.name}: {report.get('items')} items, "
                  f"{report.get('generated_this_run')} prompts generated, "
                  f"{report.get('unparseable')} unparseable"
                  + (f", {report['unreadable_answers']} answers without a readable label"
                     if report.get("unreadable_answers") is not None else ""))
        paths[task.name] = predictions_path(state.out_dir, task.name)
    return paths


def run_official_fewshot(state: RunState, tasks: Sequence[Any], backend) -> dict[str, Path]:
    """The USB release's GPT-3.5 protocol (trainers.fewshot.official) for every task:
    predictions/<task>.jsonl, outputs/<task>.jsonl (prompts and raw answers) and a report.
    Answers come from the backend's response cache when a run is repeated."""
    spec = state.spec
    if spec.fewshot_backend != "openai" or spec.openai_api != "chat":
        raise SumbenchError(f"--style {OFFICIAL_GPT35_STYLE} reproduces the release's "
                            f"OpenAI chat protocol: use --fewshot-backend openai with "
                            f"--openai-api chat")
    state.config["fewshot"] = {"backend": spec.fewshot_backend, "style": OFFICIAL_GPT35_STYLE,
                               "fingerprint": backend.fingerprint()}
    state.fewshot, paths = {}, {}
    for task in tasks:
        records, report, outputs = official_predict(task, backend, state.data_dir,
                                                    spec.variant, split=spec.split)
        write_jsonl(state.out_dir / "outputs" / f"{task.name}.jsonl", outputs)
        write_jsonl(state.out_dir / "predictions" / f"{task.name}.jsonl", records)
        state.fewshot[task.name] = report
        state.models[task.name] = fewshot_model_info(spec, backend)
        state.log(f"{OFFICIAL_GPT35_STYLE} {task.name}: {report['items']} items, "
                  f"{report['prompts']} prompts, {report['unparseable']} unparseable")
        paths[task.name] = predictions_path(state.out_dir, task.name)
    return paths


def fewshot_model_info(spec: RunSpec, backend) -> dict[str, Any]:
    """The few-shot model for results.json: name, revision, the hub commit it resolved to
    (HF backends; None for a local folder or when unknown), backend."""
    info = getattr(backend, "info", {}) or {}
    return {"model": spec.model, "revision": spec.revision, "commit": info.get("commit"),
            "backend": spec.fewshot_backend}
