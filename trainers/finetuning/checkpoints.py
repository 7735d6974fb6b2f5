"""The fine-tuning run's folder on disk: checkpoints, best weights, final model, config and log.

Layout (under the run's output folder): `checkpoints/step-NNNNNNNN/` (trainable weights,
optimizer, scheduler, loop state), `best/` (weights of the best evaluation), `train_config.json`
(spec + provenance of the first run and of each resume), `train_log.jsonl`, `train_result.json`
(loop state + provenance) and the final `model/` or `adapter/`.
Only the trainable weights are saved in checkpoints (all of them in full fine-tuning, the LoRA
matrices with LoRA). The `save_*` functions write on process 0 and end with a barrier (call
them on every process); the config and log writers are called by process 0 only. Folders are
written atomically, and old checkpoints leave the `step-*` names before they are deleted.
"""
from __future__ import annotations

import json
import os
import shutil
from collections.abc import Sequence
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any

from tasks.plumbing.atomic import atomic_directory
from tasks.plumbing.errors import DataError, SumbenchError
from tasks.plumbing.io import read_json, read_jsonl, write_json, write_jsonl
from tasks.plumbing.provenance import provenance
from trainers.finetuning import data as train_data
from trainers.finetuning.lora import save_adapter
from trainers.finetuning.profiles import RESUMABLE_SPEC_FIELDS, FinetuneSpec
from trainers.finetuning.training_run import TrainingRun, TrainState

CHECKPOINTS = "checkpoints"


# ---- weights -----------------------------------------------------------------------------

def trainable_state(model) -> dict[str, Any]:
    return {name: param.detach().cpu().clone() for name, param in model.named_parameters()
            if param.requires_grad}


def load_trainable_state(model, state: dict[str, Any]) -> None:
    import torch

    with torch.no_grad():
        for name, param in model.named_parameters():
            if param.requires_grad:
                if name not in state:
                    raise SumbenchError(f"checkpoint lacks weight '{name}'")
                param.copy_(state[name])


def save_weights(run: TrainingRun, path: Path) -> None:
    """The trainable weights and loop state (e.g. `best/`), written by process 0."""
    import torch

    if run.dist.is_main:
        with atomic_directory(path) as staging:
            torch.save(trainable_state(run.model), staging / "trainable.pt")
            write_json(staging / "state.json", asdict(run.state))
    run.dist.barrier()


def check_best_step(best_dir: Path, best_step: int) -> None:
    """`best/` must hold the weights of the run's best step (a killed attempt may have saved
    a later best that the resumed run never reached)."""
    saved = read_json(best_dir / "state.json")
    step = saved.get("best_step") if isinstance(saved, dict) else None
    if step != best_step:
        raise SumbenchError(f"{best_dir} holds the weights of step {step}, but the run's best "
                            f"evaluation was at step {best_step}; delete {best_dir} and "
                            f"resume from a checkpoint before step {best_step}")


# ---- checkpoints -------------------------------------------------------------------------

def save_checkpoint(run: TrainingRun, barrier: bool = True) -> Path:
    """Weights, optimizer, scheduler and loop state; keeps the newest `keep_checkpoints`.
    `barrier=False`: process 0 writes without waiting for the others (when stopping)."""
    import torch

    path = run.out_dir / CHECKPOINTS / f"step-{run.state.global_step:08d}"
    if run.dist.is_main:
        with atomic_directory(path) as staging:
            torch.save(trainable_state(run.model), staging / "trainable.pt")
            torch.save(run.optimizer.state_dict(), staging / "optimizer.pt")
            torch.save(run.scheduler.state_dict(), staging / "scheduler.pt")
            write_json(staging / "state.json", asdict(run.state))
        remove_checkpoints(run.out_dir,
                           checkpoint_folders(run.out_dir)[:-run.spec.keep_checkpoints])
    if barrier:
        run.dist.barrier()
    return path


def remove_checkpoints(out_dir: Path, folders: Sequence[Path]) -> None:
    """Delete checkpoint folders, each first renamed out of the `step-*` names (a deletion
    stopped half-way never leaves a partial checkpoint to resume from), and the leftovers of
    deletions stopped before."""
    for folder in folders:
        doomed = folder.with_name(f".{folder.name}.removing")
        shutil.rmtree(doomed, ignore_errors=True)
        os.replace(folder, doomed)
    for doomed in sorted((Path(out_dir) / CHECKPOINTS).glob(".step-*.removing")):
        shutil.rmtree(doomed, ignore_errors=True)


def checkpoint_folders(out_dir: Path) -> list[Path]:
    """The run's checkpoint folders, oldest first."""
    folder = Path(out_dir) / CHECKPOINTS
    return sorted(folder.glob("step-*")) if folder.is_dir() else []


def latest_checkpoint(out_dir: str | Path) -> Path | None:
    found = checkpoint_folders(Path(out_dir))
    return found[-1] if found else None


def load_checkpoint(path: Path, model, optimizer, scheduler, device) -> TrainState:
    """Restore a checkpoint folder; a missing, truncated or damaged file is a SumbenchError
    naming it (delete that step-* folder to resume from the one before)."""
    state = TrainState(**read_json(path / "state.json"))
    load_trainable_state(model, _torch_file(path / "trainable.pt", "cpu"))
    optimizer.load_state_dict(_torch_file(path / "optimizer.pt", device))
    scheduler.load_state_dict(_torch_file(path / "scheduler.pt", "cpu"))
    return state


def _torch_file(path: Path, device) -> Any:
    import pickle

    import torch

    try:
        return torch.load(path, map_location=device)
    except (OSError, RuntimeError, EOFError, pickle.UnpicklingError, ValueError) as error:
        reason = (str(error).strip().splitlines() or [type(error).__name__])[0]
        raise SumbenchError(f"{path}: checkpoint file is missing, truncated or damaged "
                            f"({reason}); delete {path.parent} to resume from the checkpoint "
                            "before it") from None


# ---- resuming ----------------------------------------------------------------------------

#: what a resumed run must share with the recorded one (keys of train_config.json's "config")
RESUME_KEYS = ("spec", "tasks", "data_dir", "data_digest", "evaluation")
#: spec fields of the micro-batch plan: `auto` resumes whatever the checkpoint recorded
PLAN_SPEC_FIELDS = ("tokens_per_microbatch", "gradient_checkpointing")


def evaluation_name(evaluate_fn) -> str | None:
    """Which best-model selection a run uses (the evaluate function's qualified name, e.g.
    `trainers.finetuning.evaluation.headline_metric_fn.<locals>.evaluate`; None: no selection)."""
    if evaluate_fn is None:
        return None
    name = getattr(evaluate_fn, "__qualname__", type(evaluate_fn).__qualname__)
    return f"{getattr(evaluate_fn, '__module__', None)}.{name}"


#: where the evaluate functions lived before trainers/ was grouped by job: a run recorded then
#: names its selection by the old module, which means the same function
EARLIER_EVALUATION_MODULES = {"trainers.evaluation.": "trainers.finetuning.evaluation.",
                              "trainers.finetune.": "trainers.finetuning.finetune."}


def recorded_evaluation(name: str | None) -> str | None:
    """A recorded `evaluation_name`, in today's module names."""
    for old, new in EARLIER_EVALUATION_MODULES.items():
        if name and name.startswith(old):
            return new + name[len(old):]
    return name


def resolved_data_dir(data_dir: str | Path | None) -> str | None:
    return None if data_dir is None else str(Path(data_dir).resolve())


def read_train_config(out_dir: Path) -> dict:
    """The "config" object of out_dir/train_config.json, with every key resuming compares."""
    path = Path(out_dir) / "train_config.json"
    data = read_json(path)
    config = data.get("config") if isinstance(data, dict) else None
    if not isinstance(config, dict):
        raise DataError("no 'config' object", path=str(path), field="config")
    for key in RESUME_KEYS:
        if key not in config:
            raise DataError("missing (a run written by an older sumbench cannot be resumed; "
                            "start it again in a new folder)", path=str(path),
                            field=f"config.{key}")
    if not isinstance(config["spec"], dict):
        raise DataError("expected a JSON object", path=str(path), field="config.spec")
    return config


def check_resumable(out_dir: Path, spec: FinetuneSpec, task_names: Sequence[str],
                    data_dir: str | Path | None, data_digest: str, evaluate_fn) -> None:
    """Refuse to resume a run whose recorded spec, tasks, data folder, best-model selection
    or training examples (digest of ids, sources and targets) differ from this one's."""
    config = read_train_config(out_dir)
    check_settings(out_dir, config, spec, task_names, data_dir, evaluate_fn)
    check_data_digest(out_dir, config, data_digest)


def check_settings(out_dir: Path, config: dict, spec: FinetuneSpec, task_names: Sequence[str],
                   data_dir: str | Path | None, evaluate_fn) -> None:
    defaults = {field.name: field.default for field in fields(FinetuneSpec)}
    changed = [f"{key} ({config['spec'].get(key, defaults.get(key))!r}; now {value!r})"
               for key, value in spec.to_dict().items()
               if key not in RESUMABLE_SPEC_FIELDS and not same_setting(
                   key, config["spec"].get(key, defaults.get(key)), value)]
    if changed:
        raise SumbenchError(f"cannot resume {out_dir}: the run used a different "
                            f"{', '.join(changed)}")
    if recorded_evaluation(config["evaluation"]) != evaluation_name(evaluate_fn):
        raise SumbenchError(f"cannot resume {out_dir}: the run selected its best model "
                            f"otherwise (early stopping by {config['evaluation']}; now "
                            f"{evaluation_name(evaluate_fn)})")
    if list(config["tasks"]) != list(task_names):
        raise SumbenchError(f"cannot resume {out_dir}: the run used different tasks "
                            f"({', '.join(config['tasks'])}; now {', '.join(task_names)})")
    if config["data_dir"] != resolved_data_dir(data_dir):
        raise SumbenchError(f"cannot resume {out_dir}: the run used another data folder "
                            f"({config['data_dir']}; now {resolved_data_dir(data_dir)})")


def same_setting(key: str, recorded: Any, now: Any) -> bool:
    """Whether a recorded spec value and today's mean the same run. `auto` today matches any
    recorded plan setting (the resumed run keeps the plan its checkpoint recorded, so a run
    made with the old boolean gradient_checkpointing, or cut by count, resumes as it was)."""
    return recorded == now or key in PLAN_SPEC_FIELDS and now == "auto"


def check_data_digest(out_dir: Path, config: dict, data_digest: str) -> None:
    if config["data_digest"] != data_digest:
        raise SumbenchError(
            f"cannot resume {out_dir}: the training examples changed (their ids, sources or "
            f"targets differ from the run's: digest {str(config['data_digest'])[:12]}, now "
            f"{data_digest[:12]}); start a new run in another folder")


def finished_output(out_dir: Path, spec: FinetuneSpec, tasks: Sequence[Any],
                    data_dir: str | Path | None, evaluate_fn) -> Path | None:
    """The final folder of a completed run with this spec, tasks, best-model selection and
    training data in out_dir (resume = nothing to do); None when there is none."""
    result_path = out_dir / "train_result.json"
    if not result_path.exists():
        return None
    config = read_train_config(out_dir)
    resolved = train_data.resolve_tasks(tasks, spec.variant)
    check_settings(out_dir, config, spec, [task.name for task in resolved], data_dir,
                   evaluate_fn)
    result = read_json(result_path)
    if not isinstance(result, dict) or not isinstance(result.get("final"), str):
        raise DataError("missing the final folder's name", path=str(result_path), field="final")
    final = out_dir / result["final"]
    if not final.exists():
        return None
    check_data_digest(out_dir, config, finished_data_digest(final, spec, resolved, data_dir))
    return final


def finished_data_digest(final: Path, spec: FinetuneSpec, tasks: Sequence[Any],
                         data_dir: str | Path | None) -> str:
    """The training-texts digest of `tasks` now, formatted with the tokenizer saved beside the
    final weights (model/ and adapter/ both hold it)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(final))
    return train_data.training_texts(
        tasks, "train", spec.variant, None if data_dir is None else str(data_dir), tokenizer,
        spec.window_budget, spec.train_fraction, spec.seed).digest()


# ---- config, log and final weights -------------------------------------------------------

def write_train_config(run: TrainingRun, model_info: dict, data_dir, resumed: bool,
                       fast_path: dict | None = None) -> None:
    """train_config.json: the run's config and provenance, with its micro-batch plan and
    device path (`fast_path`). A resumed run keeps the first run's and adds its own, with the
    step it resumed from, to "resumes" (so the file tells which code trained which steps)."""
    config = {"spec": run.spec.to_dict(), "tasks": list(run.examples.task_names),
              "data_dir": resolved_data_dir(data_dir), "data_digest": run.examples.digest,
              "model": model_info, "device": str(run.dist.device),
              "world_size": run.dist.world_size,
              "gradient_accumulation_steps": run.accumulation,
              "micro_batch_plan": run.plan.to_dict(), "fast_path": fast_path,
              "precision": "bf16" if run.bf16 else "fp32",
              "steps_per_epoch": run.steps_per_epoch, "total_steps": run.total_steps,
              "data": run.examples.summary(), "evaluation": evaluation_name(run.evaluate_fn)}
    path = run.out_dir / "train_config.json"
    record = provenance(config, seeds={"seed": run.spec.seed})
    if resumed:
        first = read_json(path)
        resumes = first.get("resumes", [])
        if not isinstance(resumes, list):
            raise DataError("expected a list", path=str(path), field="resumes")
        record = {**first, "resumes": [*resumes, {"step": run.state.global_step,
                                                   "provenance": record}]}
    write_json(path, record)


def append_log(out_dir: Path, entry: dict) -> None:
    """One line of train_log.jsonl; an undefined value (NaN) is written as null, so the log
    stays valid JSON."""
    entry = {key: None if isinstance(value, float) and value != value else value
             for key, value in entry.items()}
    with open(out_dir / "train_log.jsonl", "a", encoding="utf-8") as handle:
        handle.write(json.dumps(entry, allow_nan=False) + "\n")


def truncate_log(path: Path, state: TrainState) -> None:
    """On resume, drop log lines written after the checkpoint being resumed (and its step's
    evaluation when the checkpoint has it still to do)."""
    def kept(entry: dict) -> bool:
        step = entry.get("step", 0)
        return step < state.global_step or step == state.global_step and not (
            state.evaluation_due and "metric" in entry)

    if path.exists():
        write_jsonl(path, [entry for entry in read_jsonl(path) if kept(entry)])


def save_final(run: TrainingRun) -> Path:
    """The final `model/` or `adapter/` (from `best/` when an evaluation saved one)."""
    import torch

    state = run.state
    best = run.out_dir / "best" / "trainable.pt"
    if state.best_step is not None and best.exists():
        check_best_step(run.out_dir / "best", state.best_step)
        load_trainable_state(run.model, torch.load(best, map_location="cpu"))
    final = run.out_dir / ("adapter" if run.spec.lora else "model")
    if run.dist.is_main:
        if run.spec.lora:
            save_adapter(run.model, run.tokenizer, final)
        else:
            with atomic_directory(final) as staging:
                run.model.save_pretrained(str(staging))
                run.tokenizer.save_pretrained(str(staging))
        write_json(run.out_dir / "train_result.json", result_record(run, final))
    run.dist.barrier()
    return final


def result_record(run: TrainingRun, final: Path) -> dict:
    """train_result.json: the final folder, the loop's counters, and the provenance of the
    process that finished the run (its config: what every resume had to share)."""
    config = read_train_config(run.out_dir)
    state = run.state
    return {"final": final.name, **asdict(state),
            "weights_from_step": state.best_step or state.global_step,
            "provenance": provenance({key: config[key] for key in RESUME_KEYS},
                                     seeds={"seed": run.spec.seed})}
