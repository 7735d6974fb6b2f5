"""The Slurm executor: an experiment's plan submitted as Slurm job arrays, and the state of
every planned job read back from its files and from Slurm.

One array per job kind (data, train, cell), in that order, each `--dependency=afterok` on
the arrays submitted before it (`--kill-on-invalid-dep=yes`: a failed dependency cancels
the dependants instead of leaving them pending forever). Array task N runs
`sumbench experiment job OUT N --kind K`, the N-th job of kind K of OUT/plan.jsonl; only
jobs whose outputs are not complete are submitted, so a resumed experiment submits what is
left. Every submission (array job id, kind, the plan jobs of its tasks, the sbatch command)
is appended to OUT/slurm.json; a task's log is OUT/logs/slurm/<kind>-<array id>_<task>.log.
"""
from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from benchmark.experiments.jobs import KINDS, LOG_DIR, Job, job_done
from benchmark.experiments.runner import JOBS_FILE
from tasks.plumbing.errors import SumbenchError
from tasks.plumbing.io import read_json, write_json

SLURM_FILE = "slurm.json"
SCRIPT_DIR = "slurm"
#: Slurm job states and what `status` calls them (anything else ended without success)
ACTIVE_STATES = {"PENDING": "pending", "CONFIGURING": "pending", "REQUEUED": "pending",
                 "RESIZING": "pending", "SUSPENDED": "pending", "RUNNING": "running",
                 "COMPLETING": "running", "STAGE_OUT": "running"}


@dataclass(frozen=True)
class SlurmOptions:
    """What every array is submitted with (`--slurm-*` options)."""
    partition: str | None = None
    gres: str | None = None
    time: str | None = None
    mem: str | None = None
    extra: tuple[str, ...] = ()

    def sbatch_args(self) -> list[str]:
        named = [("--partition", self.partition), ("--gres", self.gres),
                 ("--time", self.time), ("--mem", self.mem)]
        return [f"{option}={value}" for option, value in named if value] + list(self.extra)


def slurm_command(name: str) -> str:
    """The path of a Slurm command, or an error saying that Slurm is not reachable here."""
    found = shutil.which(name)
    if not found:
        raise SumbenchError(f"--executor slurm: {name} is not on PATH (run this on a Slurm "
                            f"login node, or use --executor local)")
    return found


def _call(argv: Sequence[str], check: bool = True) -> subprocess.CompletedProcess:
    try:
        result = subprocess.run(list(argv), capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise SumbenchError(f"{shlex.join(argv)} failed: {error}") from None
    if check and result.returncode != 0:
        message = (result.stderr or result.stdout).strip().splitlines()
        raise SumbenchError(f"{shlex.join(argv)} failed (exit code {result.returncode}): "
                            f"{message[-1] if message else 'no message'}")
    return result


def array_ranges(indices: Sequence[int]) -> str:
    """Slurm's --array list of sorted 1-based indices: [1, 2, 3, 5] -> "1-3,5"."""
    parts, start = [], None
    for position, index in enumerate(indices):
        if start is None:
            start = index
        if position + 1 == len(indices) or indices[position + 1] != index + 1:
            parts.append(str(start) if start == index else f"{start}-{index}")
            start = None
    return ",".join(parts)


def expand_ranges(text: str) -> list[int]:
    """The task ids of a Slurm array range ("1-3,5", "2-8:2", "1-6%2"); [] for none."""
    indices = []
    for part in text.split("%")[0].split(","):
        bounds, _, step = part.partition(":")
        first, _, last = bounds.partition("-")
        if first.isdigit() and (not last or last.isdigit()) and (not step or step.isdigit()):
            indices += range(int(first), int(last or first) + 1, int(step or 1))
    return indices


def job_script(out: Path, kind: str) -> Path:
    """OUT/slurm/<kind>.sh: array task N runs the N-th job of the kind, with this Python."""
    path = out / SCRIPT_DIR / f"{kind}.sh"
    path.parent.mkdir(parents=True, exist_ok=True)
    command = shlex.join([sys.executable, "-m", "benchmark", "experiment", "job", str(out)])
    path.write_text(f"#!/bin/bash\n# sumbench: the {kind} jobs of {out / 'plan.jsonl'}\n"
                    f'exec {command} "$SLURM_ARRAY_TASK_ID" --kind {kind}\n',
                    encoding="utf-8")
    path.chmod(0o755)
    return path


def submissions(out: Path) -> list[dict]:
    path = out / SLURM_FILE
    return read_json(path, what="Slurm submissions")["submissions"] if path.is_file() else []


def submit_plan(out: Path, jobs: Sequence[Job], options: SlurmOptions) -> list[dict]:
    """Submit every unfinished job as one array per kind; returns the new submissions."""
    out = out.resolve()
    sbatch = slurm_command("sbatch")
    states = job_states(out, jobs)
    active = [state for state in states if state["state"] in ("pending", "running")]
    done = {state["name"] for state in states if state["state"] == "done"}
    if active:
        raise SumbenchError(f"{len(active)} jobs of {out} are still pending or running in "
                            f"Slurm (first: {active[0]['name']}, job {active[0]['slurm_id']}); "
                            f"wait for them (sumbench experiment status {out}) or scancel them")
    (out / LOG_DIR / SCRIPT_DIR).mkdir(parents=True, exist_ok=True)
    made, earlier, recorded = [], [], submissions(out)
    for kind in KINDS:
        of_kind = [job for job in jobs if job.kind == kind]
        todo = {index: job.name for index, job in enumerate(of_kind, 1) if job.name not in done}
        if not todo:
            continue
        argv = [sbatch, "--parsable", f"--array={array_ranges(list(todo))}",
                f"--job-name=sumbench-{kind}", f"--chdir={out}",
                f"--output={out / LOG_DIR / SCRIPT_DIR / kind}-%A_%a.log", *options.sbatch_args()]
        if earlier:
            argv += [f"--dependency=afterok:{':'.join(earlier)}", "--kill-on-invalid-dep=yes"]
        argv.append(str(job_script(out, kind)))
        job_id = _call(argv).stdout.strip().split(";")[0]
        earlier.append(job_id)
        made.append({"kind": kind, "job_id": job_id, "tasks": {str(i): n for i, n in todo.items()},
                     "command": shlex.join(argv), "submitted": time.strftime(
                         "%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
        # written after each array, so a later sbatch failing leaves the earlier ones known
        write_json(out / SLURM_FILE, {"format": "sumbench-slurm/1",
                                      "submissions": recorded + made})
    return made


def _latest_tasks(out: Path) -> dict[str, tuple[str, str, str]]:
    """job name -> (Slurm task id "A_N", its log path, kind) of its latest submission."""
    latest = {}
    for entry in submissions(out):
        for index, name in entry["tasks"].items():
            log = out / LOG_DIR / SCRIPT_DIR / f"{entry['kind']}-{entry['job_id']}_{index}.log"
            latest[name] = (f"{entry['job_id']}_{index}", str(log), entry["kind"])
    return latest


def slurm_states(array_ids: Sequence[str]) -> dict[str, str]:
    """Slurm task id "A_N" -> Slurm state (PENDING, RUNNING, COMPLETED, FAILED, ...) of the
    given arrays: squeue for queued tasks, then `scontrol show job` for those that ended
    (kept for MinJobAge), then sacct where accounting exists."""
    states: dict[str, str] = {}
    if not array_ids or not shutil.which("squeue"):
        return states
    for array in array_ids:
        queued = _call(["squeue", "-h", "-r", "-j", array, "-o", "%i|%T"], check=False)
        for line in queued.stdout.split():
            task, _, state = line.partition("|")
            states[task] = state
        shown = _call(["scontrol", "-o", "show", "job", array], check=False)
        for line in shown.stdout.splitlines():
            fields = dict(item.split("=", 1) for item in line.split() if "=" in item)
            for index in expand_ranges(fields.get("ArrayTaskId", "")):
                states.setdefault(f"{fields.get('ArrayJobId')}_{index}",
                                  fields.get("JobState", "UNKNOWN"))
        if shutil.which("sacct"):
            accounted = _call(["sacct", "-n", "-P", "-j", array, "-o", "JobID,State"],
                              check=False)
            for line in accounted.stdout.splitlines():
                task, _, state = line.partition("|")
                if "_" in task and "." not in task:
                    states.setdefault(task, state.split()[0] if state else "UNKNOWN")
    return states


def job_states(out: Path, jobs: Sequence[Job]) -> list[dict]:
    """Each planned job's state: done | running | pending | failed | not run, with the log of
    a failed job and its Slurm task id, from its files, Slurm (where it was submitted) and
    OUT/jobs.json (where it ran here)."""
    latest = _latest_tasks(out)
    slurm = slurm_states(sorted({task.split("_")[0] for task, _, _ in latest.values()}))
    local = read_json(out / JOBS_FILE) if (out / JOBS_FILE).is_file() else {}
    return [_job_state(job, latest.get(job.name), slurm, local.get(job.name)) for job in jobs]


def _job_state(job: Job, submitted: tuple[str, str, str] | None, slurm: dict[str, str],
               ran_here: dict | None) -> dict:
    state = {"name": job.name, "kind": job.kind, "state": "not run", "log": None,
             "slurm_id": None, "detail": None}
    if job_done(job):
        return dict(state, state="done")
    if submitted:
        task, log, _ = submitted
        found = slurm.get(task)
        state.update(slurm_id=task, log=log)
        if found in ACTIVE_STATES:
            return dict(state, state=ACTIVE_STATES[found], log=None)
        detail = ("Slurm: COMPLETED, but its outputs are incomplete" if found == "COMPLETED"
                  else f"Slurm: {found}" if found else "Slurm no longer knows the job, and its "
                  "outputs are incomplete")
        return dict(state, state="failed", detail=detail)
    if ran_here and ran_here.get("status") in ("failed", "skipped"):
        return dict(state, state="failed", log=ran_here.get("log"), detail=ran_here.get("error"))
    if Path(job.out).exists():
        return dict(state, state="failed", detail="outputs incomplete: it failed, was stopped "
                                                  "or is still running")
    return state


def status_lines(states: Sequence[dict]) -> list[str]:
    """`sumbench experiment status`: one line per job, then the counts."""
    width = max((len(state["name"]) for state in states), default=0)
    lines = []
    for state in states:
        extra = [state["slurm_id"] and f"slurm {state['slurm_id']}", state["detail"],
                 state["log"] and f"log {state['log']}"]
        lines.append((f"{state['name']:<{width}}  {state['state']:<8}"
                      + "".join(f"  {item}" for item in extra if item)).rstrip())
    counts = {}
    for state in states:
        counts[state["state"]] = counts.get(state["state"], 0) + 1
    order = ("done", "running", "pending", "failed", "not run")
    lines.append(f"{len(states)} jobs: " + ", ".join(f"{counts[name]} {name}" for name in order
                                                     if name in counts))
    return lines


def wait_for(out: Path, jobs: Sequence[Job], longest_poll_s: float = 30.0) -> list[dict]:
    """Wait until no job of the experiment is pending or running in Slurm; a line on
    stderr whenever the counts change. Polls soon after a change, then less and less often
    (up to `longest_poll_s`). Returns the final states."""
    shown, delay = None, 0.5
    while True:
        states = job_states(out, jobs)
        summary = status_lines(states)[-1]
        if summary != shown:
            print(f"sumbench experiment: {summary}", file=sys.stderr, flush=True)
            shown, delay = summary, 0.5
        if not any(state["state"] in ("pending", "running") for state in states):
            return states
        time.sleep(delay)
        delay = min(delay * 1.5, longest_poll_s)
