"""Experiment jobs: complete `sumbench` command lines with dependencies, a plan file for
clusters, and a local runner that skips finished jobs and goes on past failed ones.

A job is exactly the command a cluster would run (`plan.jsonl`, one JSON object per line:
name, kind, command, argv, out, needs). The local runner executes the same argv in process
(`benchmark.cli.main`), with the job's output teed to `OUT/logs/<job>.log`: what runs here is
what the plan says. A job whose outputs are complete is reused, never recomputed; a job
whose dependency failed is skipped; a failure is reported with its log path and the rest go
on.
"""
from __future__ import annotations

import contextlib
import io
import os
import shlex
import sys
import traceback
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from benchmark.cli import INTERRUPTED, TERMINATED, Terminated, main
from benchmark.results import read_results
from tasks.plumbing.errors import DataError, SumbenchError, json_type
from tasks.plumbing.io import iter_jsonl, read_json, write_jsonl
from tasks.validation import require_str, require_str_list

PLAN_FILE = "plan.jsonl"
LOG_DIR = "logs"
KINDS = ("data", "train", "cell")


@dataclass(frozen=True)
class Job:
    name: str                 # unique, e.g. "train/biographies", "cell/biographies/companies"
    kind: str                 # "data" | "train" | "cell"
    argv: tuple[str, ...]     # sumbench arguments
    out: str                  # its output folder (absolute)
    needs: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise SumbenchError(f"unknown job kind {self.kind!r}")

    @property
    def command(self) -> str:
        return shlex.join(["sumbench", *self.argv])

    @property
    def log_name(self) -> str:
        return self.name.replace("/", "__") + ".log"

    def to_dict(self) -> dict:
        return {**asdict(self), "argv": list(self.argv), "needs": list(self.needs),
                "command": self.command}


def job_done(job: Job) -> bool:
    """Whether the job's outputs are complete (then it is reused, not rerun)."""
    out = Path(job.out)
    if job.kind == "train":
        result = out / "train_result.json"
        if not result.is_file():
            return False
        written = read_json(result, what="training result")
        if not isinstance(written, dict):
            raise DataError(f"expected a JSON object, got {json_type(written)}",
                            path=str(result))
        final = written.get("final")
        return isinstance(final, str) and (out / final).exists()
    if job.kind == "cell":
        if not (out / "results.json").is_file():
            return False
        check_cell_results(job, out / "results.json")
        return True
    return (out / "build_info.json").is_file()


def _option(argv: Sequence[str], option: str) -> str | None:
    return argv[argv.index(option) + 1] if option in argv[:-1] else None


def check_cell_results(job: Job, path: Path) -> None:
    """A cell's results.json must come from the cell's own command: the test variant and
    the model it names (a results file copied from another cell would be collected as this
    one's)."""
    spec = read_results(path)["spec"]
    for field, option in (("variant", "--variant"), ("model", "--model")):
        wanted, found = _option(job.argv, option), spec.get(field)
        same = found == wanted or (field == "model" and isinstance(found, str) and wanted
                                   and Path(found).resolve() == Path(wanted).resolve())
        if wanted is not None and not same:
            raise DataError(f"made by another command: its {field} is {found!r}, while job "
                            f"{job.name} runs {wanted!r}", path=str(path),
                            field=f"spec.{field}")


def write_plan(jobs: Sequence[Job], path: Path) -> None:
    write_jsonl(path, [job.to_dict() for job in jobs])


def within(path: Path, folder: Path) -> bool:
    """Whether `path` is `folder` or inside it, by the file system's identity (the same
    folder seen through another mount or a symlink counts; a copy does not)."""
    for candidate in (path, *path.parents):
        if candidate.exists():
            try:
                if os.path.samefile(candidate, folder):
                    return True
            except OSError:
                return False
    return False


def read_plan(path: Path, out: Path | None = None) -> list[Job]:
    """The jobs of a plan file; a line that is not a job is a DataError naming its field.
    With `out` (the experiment folder), a job writing outside it is an error: the plan's
    paths are absolute, so a moved or copied folder would read and write the original."""
    jobs = []
    for line, record in iter_jsonl(path):
        try:
            kind = require_str(record, "kind")
            if kind not in KINDS:
                raise DataError(f"unknown job kind {kind!r} (one of {', '.join(KINDS)})",
                                field="kind")
            jobs.append(Job(require_str(record, "name"), kind,
                            tuple(require_str_list(record, "argv")), require_str(record, "out"),
                            tuple(require_str_list(record, "needs"))))
        except DataError as error:
            raise error.located(str(path), line) from None
        if out is not None and not within(Path(jobs[-1].out), out):
            raise DataError(f"job {jobs[-1].name} writes to {jobs[-1].out}, outside "
                            f"{out.resolve()}: the plan was made for another folder (moved or "
                            f"copied since); use it where it was planned, or plan the "
                            f"experiment here again", path=str(path))
    return jobs


class _Tee(io.TextIOBase):
    """Writes to several text streams (a job's log and the terminal)."""

    def __init__(self, *streams):
        self.streams = streams

    def write(self, text: str) -> int:
        for stream in self.streams:
            stream.write(text)
        return len(text)

    def flush(self) -> None:
        for stream in self.streams:
            stream.flush()

    def isatty(self) -> bool:
        return False


@contextlib.contextmanager
def job_argv(job: Job):
    """sys.argv as the job's own command while it runs in process, so the provenance of the
    files it writes names the job's command, not `sumbench experiment ...`."""
    saved = sys.argv
    sys.argv = ["sumbench", *job.argv]
    try:
        yield
    finally:
        sys.argv = saved


def run_one(job: Job, log_path: Path) -> tuple[str, str | None]:
    """Run a job in process, its output teed to `log_path`: ("done" | "failed", error).
    A job stopped by Ctrl-C or SIGTERM stops the whole experiment (the signal is raised
    again here), so one Ctrl-C is enough and the exit code says what happened."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    terminal = sys.__stderr__ or sys.stderr
    with open(log_path, "a", encoding="utf-8") as log:
        log.write(f"$ {job.command}\n")
        log.flush()
        try:
            with contextlib.redirect_stdout(_Tee(log)), \
                    contextlib.redirect_stderr(_Tee(log, terminal)), job_argv(job):
                code = main(list(job.argv))
        except SystemExit as error:  # argparse errors
            code = error.code if isinstance(error.code, int) else 2
        except Exception as error:  # noqa: BLE001 - one failed job must not stop the rest
            log.write(traceback.format_exc())
            return "failed", f"{type(error).__name__}: {error}"
    if code == TERMINATED:
        raise Terminated()
    if code == INTERRUPTED:
        raise KeyboardInterrupt()
    return ("done", None) if code == 0 else ("failed", f"exit code {code}")


def run_jobs(jobs: Sequence[Job], out_dir: Path) -> dict[str, dict]:
    """Run the jobs in order (dependencies first); returns name -> {"status", "log",
    "error"} with status done | reused | failed | skipped."""
    from tqdm.auto import tqdm

    report: dict[str, dict] = {}
    bar = tqdm(jobs, desc="experiment jobs", unit="job", disable=None,
               file=sys.__stderr__ or sys.stderr)
    for job in bar:
        bar.set_postfix_str(job.name)
        log = out_dir / LOG_DIR / job.log_name
        failed_needs = [need for need in job.needs
                        if report.get(need, {}).get("status") in ("failed", "skipped")]
        if failed_needs:
            report[job.name] = {"status": "skipped", "log": None,
                                "error": f"needs {', '.join(failed_needs)}"}
        elif job_done(job):
            report[job.name] = {"status": "reused", "log": None, "error": None}
        else:
            status, error = run_one(job, log)
            report[job.name] = {"status": status, "log": str(log), "error": error}
            if error:
                print(f"sumbench experiment: job {job.name} failed ({error}); log: {log}",
                      file=sys.__stderr__ or sys.stderr)
    return report
