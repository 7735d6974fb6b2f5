"""`sumbench experiment transfer|fractions|labels|collect` (benchmark.experiments).

  transfer   cross-domain transfer: one model per training domain, evaluated on every domain
  fractions  data-size curves: models trained on nested seeded fractions of the training articles
  labels     heuristic training labels (EVEXT, FAC, FIX) vs fractions of the human labels
  job        run the N-th job of one kind from OUT/plan.jsonl (cluster array tasks)
  submit     submit an experiment's unfinished jobs to Slurm (after --plan, or to resume)
  status     each job's state: done, running, pending, failed (with its log) or not run
  collect    assemble an experiment's outputs from its finished jobs

Every experiment writes OUT/experiment.json, OUT/plan.jsonl (complete `sumbench` command lines
with their dependencies), one folder per job, the result JSON with provenance, figures and
summary.md. --executor slurm submits the jobs as Slurm arrays (job ids in OUT/slurm.json);
--plan runs nothing. --resume reuses every finished training and cell. The exit code is 0
only when every job that can run finished. Without --tasks an experiment covers every USB
task (labels: evidence extraction, factuality classification and fixing factuality).
"""
from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

from benchmark.cli import build_parser, main
from benchmark.commands import command_help, positive_int
from benchmark.commands.options import HEURISTIC_TASKS, add_option, given_or_default
from benchmark.commands.run import local_or_id
from benchmark.commands.train import build_spec
from benchmark.encoder_run import task_specs
from benchmark.experiments.common import ModelSettings
from benchmark.experiments.data import DataSource
from benchmark.experiments.fractions import FractionsSpec
from benchmark.experiments.jobs import PLAN_FILE, job_argv, read_plan
from benchmark.experiments.labels import LabelsSpec
from benchmark.experiments.runner import (
    all_finished,
    collect_experiment,
    run_experiment,
    start,
    unfinished_note,
)
from benchmark.experiments.slurm import (
    SlurmOptions,
    job_states,
    status_lines,
    submit_plan,
    wait_for,
)
from benchmark.experiments.transfer import TransferSpec
from leaderboard.client import submit_run_folder
from tasks import DEFAULT_SUITE, get_task, parse_task_list, task_names
from tasks.plumbing.errors import SumbenchError
from trainers.encoders.pipeline import is_encoder_profile
from trainers.encoders.spec import ENCODER_TASKS
from trainers.finetuning.distributed import check_training_device_name
from trainers.models.model_loading import check_model_source


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "experiment", help=command_help("experiment"),
        description=__doc__.split("\n\n", 1)[1], formatter_class=argparse.RawTextHelpFormatter)
    commands = parser.add_subparsers(dest="experiment_command", metavar="KIND")
    commands.required = True
    transfer = commands.add_parser("transfer", help="cross-domain transfer (paper Section 6)")
    _common(transfer)
    transfer.add_argument("--domains", default="biographies,companies,disasters,schools",
                          help="training domains (comma-separated)")
    transfer.add_argument("--train-docs", type=positive_int, default=40)
    transfer.add_argument("--val-docs", type=positive_int, default=19)
    transfer.add_argument("--test-docs", type=positive_int, default=38)
    transfer.add_argument("--full-domain", metavar="D",
                          help="add a row for D trained on its full train split")
    transfer.set_defaults(handler=run_transfer)
    fractions = commands.add_parser("fractions", help="data-size curves (paper Table 5)")
    _common(fractions)
    fractions.add_argument("--fractions", default="0.05,0.1,0.2,1.0", help="in (0, 1]")
    fractions.add_argument("--seeds", default=None, help="subset/training seeds, e.g. 0,1,2 "
                                                         "(default: --seed)")
    add_option(fractions, "variant")
    fractions.set_defaults(handler=run_fractions)
    labels = commands.add_parser("labels", help="heuristic vs human training labels")
    _common(labels)
    labels.add_argument("--human-fractions", default="1.0,0.2,0.1,0.05")
    add_option(labels, "evidence")
    add_option(labels, "corruption")
    add_option(labels, "superpal_model")
    add_option(labels, "infill_model")
    labels.set_defaults(handler=run_labels)
    job = commands.add_parser("job", help="run one job of a plan (for cluster array tasks)")
    job.add_argument("out", metavar="OUT")
    job.add_argument("index", type=positive_int,
                     help="1-based position among the plan's jobs of --kind")
    job.add_argument("--kind", choices=("data", "train", "cell"), default="train")
    job.set_defaults(handler=run_job)
    collect = commands.add_parser("collect", help="assemble outputs from finished jobs")
    collect.add_argument("out", metavar="OUT")
    collect.set_defaults(handler=run_collect)
    submit = commands.add_parser("submit", help="submit the unfinished jobs of a plan to Slurm")
    submit.add_argument("out", metavar="OUT")
    _slurm_options(submit)
    submit.set_defaults(handler=run_submit)
    status = commands.add_parser("status", help="the state of every job of an experiment")
    status.add_argument("out", metavar="OUT")
    status.set_defaults(handler=run_status)


def _slurm_options(parser) -> None:
    group = parser.add_argument_group("Slurm (--executor slurm, submit)")
    for kind in ("slurm_partition", "slurm_gres", "slurm_time", "slurm_mem", "slurm_extra",
                 "wait"):
        add_option(group, kind)


def _common(parser) -> None:
    source = parser.add_mutually_exclusive_group(required=True)
    add_option(source, "raw")
    add_option(source, "data")
    add_option(parser, "model", required=True)
    add_option(parser, "profile")
    add_option(parser, "lora")
    add_option(parser, "tasks")
    add_option(parser, "seed")
    add_option(parser, "max_steps")
    add_option(parser, "set_spec")
    add_option(parser, "early_stopping")
    add_option(parser, "bootstrap")
    add_option(parser, "batch_size")
    add_option(parser, "max_new_tokens")
    add_option(parser, "device")
    add_option(parser, "out_dir", required=True)
    for kind in ("plan", "executor", "resume", "submit", "token"):
        add_option(parser, kind)
    _slurm_options(parser)


def _settings(args, default_tasks: tuple[str, ...] = ("all",)):
    """The experiment's ModelSettings: every field from the option of its name, left at
    its default when not given; the tasks canonical (`default_tasks` when not given)."""
    values = {name: getattr(args, name, None)
              for name in (spec_field.name for spec_field in dataclasses.fields(ModelSettings))}
    if is_encoder_profile(args.profile) and default_tasks == ("all",):
        default_tasks = tuple(ENCODER_TASKS.values())  # the tasks an encoder profile runs
    values.update(model=local_or_id(args.model),
                  tasks=parse_task_list(args.tasks or list(default_tasks)),
                  lora=bool(args.lora), overrides=tuple(args.overrides))
    return ModelSettings(**{name: value for name, value in values.items() if value is not None})


def _source(args):
    return DataSource(raw=local_or_id(args.raw), data=local_or_id(args.data))


def number_list(text: str, kind, name: str) -> list:
    try:
        values = [kind(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise SumbenchError(f"{name} expects comma-separated numbers, got {text!r}") from None
    if not values:
        raise SumbenchError(f"{name} is empty")
    return values


def name_list(text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in text.split(",") if part.strip())


def check_settings(settings, model: bool = True) -> None:
    """What every training job would refuse, refused before the experiment starts (a job
    failing on it would leave a folder of failed jobs): the tasks (the USB suite's), the
    profile and --set fields, and (`model`) a local model that does not exist; a --plan
    may name a path that exists only where its jobs will run."""
    try:
        check_training_device_name(settings.device)
    except SumbenchError as error:
        raise SumbenchError(f"--device: {error}") from None
    outside = [name for name in settings.tasks if get_task(name).suite != DEFAULT_SUITE]
    if outside:
        suite = ", ".join(task_names(DEFAULT_SUITE))
        raise SumbenchError(f"--tasks: {', '.join(outside)} not of the {DEFAULT_SUITE} suite "
                            f"the experiments derive data for ({suite})")
    if settings.encoder:
        check_encoder_settings(settings)
    else:
        build_spec(build_parser().parse_args(list(settings.train_argv(Path("data"), "all",
                                                                       Path("out")))))
    if model:
        check_model_source(settings.model)


def check_encoder_settings(settings) -> None:
    """What an encoder profile's training jobs would refuse: tasks it does not run, LoRA,
    loss-based early stopping, --set fields that are no encoder spec field."""
    if settings.lora:
        raise SumbenchError("--lora: encoder profiles fine-tune every weight")
    if settings.early_stopping == "loss":
        raise SumbenchError("--early-stopping loss: encoder runs keep the epoch with the best "
                            "validation metric (metric) or the last one (none)")
    overrides = list(settings.overrides)
    if settings.max_steps is not None:
        overrides.append(("max_steps", settings.max_steps))
    task_specs(settings.profile, settings.tasks, settings.model, settings.seed, overrides)


def _execute(kind: str, spec, args) -> int:
    slurm = args.executor == "slurm"
    if slurm and args.plan:
        raise SumbenchError("--plan writes the plan and runs nothing; --executor slurm "
                            "submits it: give one of them")
    if not slurm and (args.wait or _slurm_given(args)):
        raise SumbenchError("--wait and the --slurm-* options need --executor slurm")
    if slurm and args.submit and not args.wait:
        raise SumbenchError("--submit with --executor slurm needs --wait: cells are submitted "
                            "to the leaderboard once they have finished")
    check_settings(spec.settings, model=not args.plan)
    if slurm:
        start(kind, spec, Path(args.out), resume=args.resume)
        return _submit_and_maybe_wait(Path(args.out), args)
    result = run_experiment(kind, spec, Path(args.out), resume=args.resume,
                            plan_only=args.plan)
    if result is None:
        return 0
    return _finished(kind, args, result, all_finished(result))


def _finished(kind: str, args, result: dict, finished: bool) -> int:
    if getattr(args, "submit", None):
        _submit_cells(args, result)
    print(f"{kind}: {Path(args.out) / 'summary.md'}", file=sys.stderr)
    return 0 if finished else 1


def _slurm_given(args) -> bool:
    return any((args.slurm_partition, args.slurm_gres, args.slurm_time, args.slurm_mem,
                args.slurm_extra))


def _submit_and_maybe_wait(out: Path, args) -> int:
    """Submit the plan's unfinished jobs to Slurm; with --wait, wait for them and collect."""
    import shlex

    out = out.resolve()
    jobs = read_plan(out / PLAN_FILE, out)
    options = SlurmOptions(args.slurm_partition, args.slurm_gres, args.slurm_time,
                           args.slurm_mem, tuple(shlex.split(args.slurm_extra)))
    made = submit_plan(out, jobs, options)
    for entry in made:
        print(f"submitted {len(entry['tasks'])} {entry['kind']} jobs: Slurm job "
              f"{entry['job_id']}", file=sys.stderr)
    if not made:
        print("every job has finished: nothing to submit", file=sys.stderr)
    if not args.wait:
        print(f"follow them with `sumbench experiment status {out}`, then "
              f"`sumbench experiment collect {out}`", file=sys.stderr)
        return 0
    wait_for(out, jobs)
    result = collect_experiment(out)
    return _finished(result["spec"]["kind"], args, result, all_finished(result))


def _submit_cells(args, result) -> None:
    import os

    token = args.token or os.environ.get("SUMBENCH_LEADERBOARD_TOKEN")
    if not token:
        raise SumbenchError("--submit needs --token (or SUMBENCH_LEADERBOARD_TOKEN)")
    for name, entry in sorted(result["jobs"].items()):
        if name.startswith("cell/") and entry["status"] in ("done", "reused"):
            cell = Path(args.out).resolve() / "cells" / name[len("cell/"):]
            variant = "all" if result["spec"]["kind"] != "transfer" else cell.name
            answer = submit_run_folder(args.submit, token, f"{Path(args.out).name}/{name}",
                                       cell, variant=variant)
            print(f"submitted {name}: {answer}", file=sys.stderr)


def run_transfer(args) -> int:
    spec = TransferSpec(_source(args), _settings(args), name_list(args.domains),
                        (args.train_docs, args.val_docs, args.test_docs), args.full_domain)
    return _execute("transfer", spec, args)


def run_fractions(args) -> int:
    seeds = number_list(args.seeds, int, "--seeds") if args.seeds else \
        [given_or_default(args, "seed")]
    spec = FractionsSpec(_source(args), _settings(args),
                         tuple(number_list(args.fractions, float, "--fractions")),
                         tuple(seeds), given_or_default(args, "variant"))
    return _execute("fractions", spec, args)


def run_labels(args) -> int:
    spec = LabelsSpec(_source(args), _settings(args, HEURISTIC_TASKS),
                      tuple(number_list(args.human_fractions, float, "--human-fractions")),
                      name_list(args.evidence or "rougeL,entity"),
                      name_list(args.corruption or "factcc"),
                      args.superpal_model, args.infill_model)
    return _execute("labels", spec, args)


def run_collect(args) -> int:
    result = collect_experiment(Path(args.out))
    print(f"collected: {Path(args.out) / 'summary.md'}", file=sys.stderr)
    note = unfinished_note(result)
    if note:
        print(f"sumbench experiment: {note}", file=sys.stderr)
    return 1 if note else 0


def run_job(args) -> int:
    jobs = [job for job in read_plan(Path(args.out) / PLAN_FILE, Path(args.out))
            if job.kind == args.kind]
    if args.index > len(jobs):
        raise SumbenchError(f"{Path(args.out) / PLAN_FILE} has {len(jobs)} {args.kind} jobs, "
                            f"not {args.index}")
    job = jobs[args.index - 1]
    print(f"job {job.name}: {job.command}", file=sys.stderr)
    with job_argv(job):
        return main(list(job.argv))


def run_submit(args) -> int:
    return _submit_and_maybe_wait(Path(args.out), args)


def run_status(args) -> int:
    out = Path(args.out).resolve()
    states = job_states(out, read_plan(out / PLAN_FILE, out))
    print("\n".join(status_lines(states)))
    return 1 if any(state["state"] == "failed" for state in states) else 0
