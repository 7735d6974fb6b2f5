"""Running an experiment: claim the folder, prepare data, plan jobs, run them (or stop at the
plan), collect, write the result JSON with provenance, figures and summary.md.

Each kind of experiment is a module (transfer, fractions, labels) with: `spec_from_dict`,
`prepare_experiment(spec, out) -> prepared`, `experiment_jobs(spec, out, prepared)`,
`experiment_result(spec, out, prepared)`, `write_figures(result, out)`,
`summary_markdown(result)` and `RESULT_FILE`.
"""
from __future__ import annotations

import importlib
import shutil
import sys
from pathlib import Path
from typing import Any

from benchmark.experiments.common import SPEC_FILE, claim_folder
from benchmark.experiments.jobs import PLAN_FILE, job_done, read_plan, run_jobs, write_plan
from benchmark.experiments.report import job_lines, notes
from tasks.plumbing.errors import SumbenchError, check_choice
from tasks.plumbing.io import read_json, write_json
from tasks.plumbing.provenance import provenance

PREPARED_FILE = "prepared.json"
JOBS_FILE = "jobs.json"
KINDS = ("transfer", "fractions", "labels")


def kind_module(kind: str):
    check_choice(kind, KINDS, "experiment kind")
    return importlib.import_module(f"benchmark.experiments.{kind}")


def start(kind: str, spec: Any, out: Path, *, resume: bool) -> tuple[Any, dict, list]:
    """Claim OUT, prepare the data (reused on resume) and write the plan."""
    module = kind_module(kind)
    out = out.resolve()
    existed = out.exists()
    fresh = not existed or (out.is_dir() and not any(out.iterdir()))
    claim_folder(out, spec.to_dict(), resume)
    try:
        prepared_path = out / PREPARED_FILE
        if prepared_path.is_file():
            prepared = read_json(prepared_path)
        else:
            prepared = module.prepare_experiment(spec, out)
            write_json(prepared_path, prepared)
        jobs = module.experiment_jobs(spec, out, prepared)
        write_plan(jobs, out / PLAN_FILE)
    except SumbenchError:  # bad input found while preparing: no half-made folder is left
        if fresh:          # to block the corrected command (an empty one given stays)
            _remove_made(out, existed)
        raise
    return module, prepared, jobs


def _remove_made(out: Path, existed: bool) -> None:
    """Remove what this run made in `out`: all of it, or its content when it existed."""
    for made in (list(out.iterdir()) if existed else [out]):
        if made.is_dir() and not made.is_symlink():
            shutil.rmtree(made, ignore_errors=True)
        else:
            made.unlink(missing_ok=True)


def run_experiment(kind: str, spec: Any, out: Path, *, resume: bool = False,
                   plan_only: bool = False) -> dict | None:
    """Everything `sumbench experiment <kind>` does; returns the result (None with --plan)."""
    out = out.resolve()
    module, prepared, jobs = start(kind, spec, out, resume=resume)
    if plan_only:
        print(f"plan: {out / PLAN_FILE} ({len(jobs)} jobs); run them, then "
              f"`sumbench experiment collect {out}`", file=sys.stderr)
        return None
    report = run_jobs(jobs, out)
    write_json(out / JOBS_FILE, report)
    return finish(module, spec, out, prepared, report)


def finish(module, spec: Any, out: Path, prepared: dict, report: dict) -> dict:
    """Collect the finished cells and write the result file, figures and summary.md."""
    result = module.experiment_result(spec, out, prepared)
    result["jobs"] = report
    result["figures"] = module.write_figures(result, out)
    result["format"] = f"sumbench-{spec.to_dict()['kind']}/1"
    result["spec"] = spec.to_dict()
    result["provenance"] = provenance(spec.to_dict(), {"seed": spec.settings.seed})
    write_json(out / module.RESULT_FILE, result)
    (out / "summary.md").write_text(module.summary_markdown(result) +
                                    notes(job_lines(report), "Jobs that did not finish"),
                                    encoding="utf-8")
    return result


def collect_experiment(out: Path) -> dict:
    """`sumbench experiment collect OUT`: assemble the outputs from finished jobs (e.g. run on
    a cluster from plan.jsonl)."""
    out = out.resolve()
    data = read_json(out / SPEC_FILE, what="experiment spec")
    module = kind_module(data.get("kind"))
    spec = module.spec_from_dict(data)
    prepared = read_json(out / PREPARED_FILE, what="prepared experiment data")
    jobs = read_plan(out / PLAN_FILE, out)
    report = {job.name: collected_status(job, job_done(job)) for job in jobs}
    return finish(module, spec, out, prepared, report)


def collected_status(job, done: bool) -> dict:
    """A planned job as `collect` finds it: done, never run (no output folder) or failed
    (its outputs are incomplete: it failed, was stopped, or is still running)."""
    if done:
        return {"status": "done", "log": None, "error": None}
    if not Path(job.out).exists():
        return {"status": "skipped", "log": None, "error": "not run yet"}
    return {"status": "failed", "log": None,
            "error": "outputs incomplete: it failed, was stopped or is still running"}


def unfinished_jobs(result: dict) -> list[str]:
    """The names of the jobs that did not finish (neither done nor reused), sorted."""
    return sorted(name for name, entry in result["jobs"].items()
                  if entry["status"] not in ("done", "reused"))


def unfinished_note(result: dict) -> str | None:
    """One line on the jobs `collect` found unfinished, or None when all finished."""
    jobs, waiting = result["jobs"], unfinished_jobs(result)
    if not waiting:
        return None
    never = sum(jobs[name]["error"] == "not run yet" for name in waiting)
    return (f"{len(waiting)} of {len(jobs)} jobs have not finished ({never} not run yet), "
            f"first: {waiting[0]}; run them with 'sumbench experiment job OUT N --kind K' "
            f"(plan.jsonl), then collect again")


def all_finished(result: dict) -> bool:
    return not unfinished_jobs(result)


