"""Encoder models the server evaluates: USB Table 2's RoBERTa-Large rows (a submission whose
profile is an encoder profile, `submit --evaluate DIR --profile roberta-large`).

- What is submitted: a folder under the model root holding one model folder per task, named by
  the task's release folder (`factuality_classification/`, `evidence_extraction/`,
  `extractive_summarization/`, `unsupported_span_prediction/`), each flat as
  `sumbench export encoders` writes it. Each task folder is checked and copied as a model
  folder is (leaderboard.service.model_source, model_fetch: opened without following links,
  plain files only, safetensors only, the instance's limits over all of them together), its
  `sumbench_head.json` among its loaded files; an adapter is refused. Other entries of the
  folder are neither read nor copied; its README.md is the card. A hub id is refused (a hub
  model holds no task folders).
- Digests: the content digest, weights fingerprint and files key of each task folder, combined
  over the task names (the duplicate rule keys on them as for any model).
- The evaluation predicts each task of the board the folder holds with
  `trainers.encoders.pipeline.predict_task` and the profile's prediction settings (input
  budgets, EXT's long-article rule, precision), the same for every entry, so that
  `sumbench predict --profile roberta-large --model DIR --data INPUTS` gives the same records.
  It generates nothing (token budget 0); its wall-clock limit counts the board's test
  instances, `ENCODER_TOKENS_PER_INSTANCE` budgeted tokens' time each.
"""
from __future__ import annotations

from pathlib import Path

from leaderboard.service.compute import EvaluationBudget
from leaderboard.service.model_fetch import (
    Budget,
    FetchedModel,
    copy_folder,
    digest_of,
    files_key,
    weights_of,
)
from leaderboard.service.model_refs import check_references, weights_fingerprint
from leaderboard.service.model_source import (
    ADAPTER_CONFIG,
    CARD,
    LOADED_NAMES,
    ModelLimits,
    ModelPlan,
    model_card,
    open_source,
    plan_folder,
    resolve_source,
)
from leaderboard.service.nofollow import Folder, refuse
from tasks import get_task
from tasks.plumbing.io import write_jsonl
from trainers.encoders.model_files import FLAT_WEIGHTS, HEAD_FILE
from trainers.encoders.pipeline import predict_task
from trainers.encoders.spec import ENCODER_TASKS, encoder_spec
from trainers.inference.generation import resolve_device

#: the files of a task folder the server loads: a model folder's, and the head's description
ENCODER_LOADED_NAMES = LOADED_NAMES | {HEAD_FILE}
#: the spec fields an evaluation predicts with (the profile's values, recorded)
PREDICTION_FIELDS = ("max_input_tokens", "max_sentences", "long_articles", "precision")
#: the prediction batch (`sumbench predict`'s default; records never depend on it)
BATCH_SIZE = 32
#: the budgeted tokens' time one test instance of an encoder task may take (a RoBERTa-Large
#: forward pass over its inputs on a CPU)
ENCODER_TOKENS_PER_INSTANCE = 16


def is_encoder_evaluation(predict: dict) -> bool:
    return isinstance(predict, dict) and predict.get("kind") == "encoder"


def encoder_predict_settings(profile: str) -> dict:
    """What an encoder evaluation predicts with: the profile's prediction fields per task."""
    tasks = {task: {field: getattr(encoder_spec(profile, task), field)
                    for field in PREDICTION_FIELDS} for task in ENCODER_TASKS}
    return {"kind": "encoder", "profile": profile, "batch_size": BATCH_SIZE, "tasks": tasks}


def plan_task_folders(folder: Folder, limits: ModelLimits, listed: list | None = None
                      ) -> dict[str, ModelPlan]:
    """{task: the plan of its folder} of every task folder the submitted folder holds
    (`listed`: the folder's entries, when the caller has listed it already)."""
    listed = folder.entries(limits.max_files) if listed is None else listed
    entries = [entry for entry in listed if entry.name in ENCODER_TASKS]
    if not entries:
        raise refuse(f"the folder holds no task folder ({', '.join(ENCODER_TASKS)}): an "
                     f"encoder model is submitted as `sumbench export encoders` writes it")
    plans = {}
    for entry in entries:
        if entry.kind != "folder":
            raise refuse(f"{entry.name} is not a folder (links are never followed)")
        with folder.child(entry.name) as task_folder:
            plan = plan_folder(task_folder, limits, ENCODER_LOADED_NAMES)
        if ADAPTER_CONFIG in plan.files:
            raise refuse(f"{entry.name}: an encoder model is a full model, not an adapter")
        lacking = [name for name in (HEAD_FILE, FLAT_WEIGHTS) if name not in plan.files]
        if lacking:
            raise refuse(f"{entry.name}: no {lacking[0]} (write the folder with `sumbench "
                         f"export encoders`)")
        plans[entry.name] = plan
    return plans


def listing_of(plans: dict[str, ModelPlan]) -> str:
    """One key of the task folders' listings (it changes when any of their files does)."""
    return digest_of([(task, plan.listing_key) for task, plan in plans.items()])


def submitted_listing(source, model_root: str | None, limits: ModelLimits) -> str:
    """At submission: the folder checked as far as it can be without reading weights."""
    if source.kind != "folder":
        raise refuse("an encoder model is evaluated from a folder under the model root (one "
                     "folder per task, as `sumbench export encoders` writes them); a hub "
                     "model holds no task folders")
    with open_source(source.name, model_root) as folder:
        return listing_of(plan_task_folders(folder, limits))


def fetch_encoder_models(name: str, revision: str | None, model_root: str | None,
                         limits: ModelLimits, dest: Path, kind: str | None = None
                         ) -> FetchedModel:
    """Every task folder copied into `dest/model/<task>/` and checked (see the module)."""
    source = resolve_source(name, model_root, revision)
    if source.kind != "folder":
        raise refuse(f"{name!r} is no folder under the model root (encoder models are "
                     f"evaluated from one)")
    budget, copies, model = Budget(limits.max_bytes), {}, dest / "model"
    with open_source(source.name, model_root) as folder:
        listed = folder.entries(limits.max_files)  # once, for the task folders and the card
        for task in plan_task_folders(folder, limits, listed):
            with folder.child(task) as task_folder:
                copies[task] = copy_folder(task_folder, limits, model / task, budget,
                                           ENCODER_LOADED_NAMES)
        card = model_card(folder) if CARD in {entry.name for entry in listed} else None
    removed = [f"{task}/{field}" for task, copied in copies.items()
               for field in check_references(copied.folder, copied.files)]
    return FetchedModel(model, digest_of([(task, c.digest) for task, c in copies.items()]),
                        digest_of([(task, weights_of(c)) for task, c in copies.items()]), card,
                        tuple(removed),
                        digest_of([(task, files_key(c)) for task, c in copies.items()]))


def evaluated_tasks(board_tasks, model: Path) -> list[str]:
    """The board's tasks the copied model holds a folder of, or a refusal naming both."""
    held = sorted(path.name for path in model.iterdir() if path.name in ENCODER_TASKS)
    tasks = [task for task in board_tasks if task in held]
    if not tasks:
        raise refuse(f"the model holds {', '.join(held)}, none of this board's tasks "
                     f"({', '.join(board_tasks)})")
    return tasks


def encoder_budget(settings, instances: int) -> EvaluationBudget:
    """No generated token; the wall clock by the test instances (see the module)."""
    seconds = settings.evaluate_base_seconds + \
        instances * ENCODER_TOKENS_PER_INSTANCE * settings.evaluate_seconds_per_token
    return EvaluationBudget(0, int(min(settings.evaluate_seconds, seconds)))


def evaluate_encoders(request: dict, progress: dict, measured) -> dict:
    """The evaluation process's work for an encoder model: each task's prediction file."""
    import torch

    settings, model, out = request["spec"], Path(request["model"]), Path(request["out"])
    device = resolve_device(settings.get("device", "auto"))
    progress["device"] = torch.device(device)
    counts = progress.setdefault("counts", {})
    for task in request["tasks"]:
        spec = encoder_spec(settings["profile"], task, model=str(model / task),
                            **settings["tasks"][task])
        records = list(get_task(task).load("test", request["board"], request["inputs"]))
        predicted = predict_task(spec, model / task, records, device=device,
                                 batch_size=int(settings["batch_size"]))
        write_jsonl(out / "predictions" / f"{task}.jsonl", predicted)
        counts[task] = {"instances": len(records), "records": len(predicted),
                        "generated_tokens": 0}
    fingerprint = digest_of([(task, weights_fingerprint([model / task / FLAT_WEIGHTS]))
                             for task in request["tasks"]])
    return {"model_fingerprint": fingerprint, "counts": counts, "max_generated_tokens": 0,
            "measured": measured(progress["device"], counts)}
