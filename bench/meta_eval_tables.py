"""Generates docs/meta-evaluation.md (not a benchmark): published meta-evaluation numbers with
95% intervals, Holm-corrected tests and significance clusters, every number computed by
`sumbench meta-eval` from ../shared/data, none typed by hand.

Groups (one `sumbench meta-eval` run each, the settings in SETTINGS):
- REALSumm: the SCU-approximation study's Table 3 rows that its released NLI scores cover
  (SGUs from GPT-4 and GPT-3.5) and ROUGE-1/2/L recall (rouge-score) and ROUGE-1.5.5's
  ROUGE-2 recall, against the released gold (the mean of each summary's SCU labels);
- PyrXSum: the released STU NLI scores and the same ROUGE rows.
The page's last line of each group says which of the comparisons the published numbers
suggest (COMPARISONS: the first of each pair correlates higher) survive the tests.

    python bench/meta_eval_tables.py [--shared ../shared] [--out docs/meta-evaluation.md]
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
import tempfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

DEFAULT_SHARED = REPO_ROOT.parent / "shared"
SETTINGS = ["--levels", "system", "summary", "--methods", "pearson", "spearman", "--ci",
            "boot-both", "--test", "perm-both", "--correction", "holm", "--n-resamples",
            "1000", "--seed", "0", "--summary-undefined", "skip"]
ROUGE = {"rouge1_recall": "ROUGE-1 R", "rouge2_recall": "ROUGE-2 R", "rougeL_recall": "ROUGE-L R",
         "rouge155-2-r": "ROUGE-2 R (1.5.5)"}
GROUPS = {
    "REALSumm": {"pyramid": "data/pyramid/realsumm",
                 "human": "data/scu_units/realsumm/realsumm-golden-labels.json",
                 "files": {"SGU GPT-4 (NLI)": "data/scu_units/realsumm/"
                                              "realsumm-nli-score-smu_gpt-4_ctx_oneshot.json",
                           "SGU GPT-3.5 (NLI)": "data/scu_units/realsumm/realsumm-nli-score-"
                                                "smu_gpt-3.5-turbo_ctx_oneshot.json"}},
    "PyrXSum": {"pyramid": "data/pyramid/pyrxsum",
                "human": "data/scu_units/pyrxsum/pyrxsum-golden-labels.json",
                "files": {"STU (NLI)": "data/scu_units/pyrxsum/pyrxsum-nli-score-smu-stus.json"}},
}
#: pairs (higher, lower) whose published correlations suggest the first is the better metric
COMPARISONS = {"REALSumm": [("SGU GPT-4 (NLI)", "SGU GPT-3.5 (NLI)"),
                            ("SGU GPT-4 (NLI)", "ROUGE-2 R (1.5.5)")],
               "PyrXSum": [("STU (NLI)", "ROUGE-2 R (1.5.5)")]}


def run_group(shared: Path, group: dict) -> dict:
    """The `--out` report of one `sumbench meta-eval` run, its labels made readable."""
    from benchmark.cli import main

    metrics = {str(shared / path): label for label, path in group["files"].items()}
    metrics.update(ROUGE)
    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch) / "report.json"
        args = ["meta-eval", "--pyramid", str(shared / group["pyramid"]), "--human",
                str(shared / group["human"]), *SETTINGS, "--out", str(out)]
        for name in metrics:
            args += ["--metric", name]
        with contextlib.redirect_stdout(io.StringIO()), \
                contextlib.redirect_stderr(io.StringIO()) as errors:
            if main(args) != 0:
                raise SystemExit(f"meta-eval failed: {errors.getvalue().strip()}")
        report = json.loads(out.read_text(encoding="utf-8"))
    readable = {Path(name).stem if Path(name).is_file() else name: label
                for name, label in metrics.items()}
    statistics = json.loads(_relabelled(json.dumps(report["statistics"]), readable))
    return in_order(statistics, list(readable.values()))


def in_order(statistics: dict, labels: list[str]) -> dict:
    """The statistics' metrics in the order given, levels and methods in SETTINGS' order (the
    report's JSON keeps its keys sorted)."""
    def ordered(by_label: dict) -> dict:
        return {label: {level: {method: by_label[label][level][method]
                                for method in ("pearson", "spearman")}
                        for level in ("system", "summary")} for label in labels}
    statistics["correlations"] = ordered(statistics["correlations"])
    statistics["intervals"]["intervals"] = ordered(statistics["intervals"]["intervals"])
    return statistics


def _relabelled(text: str, labels: dict[str, str]) -> str:
    for old, new in sorted(labels.items(), key=lambda item: -len(item[0])):
        text = text.replace(json.dumps(old), json.dumps(new))
    return text


def surviving(statistics: dict, pairs: list[tuple[str, str]]) -> str:
    """One line: each suggested comparison and the cells (level, method) where it holds."""
    parts = []
    for better, worse in pairs:
        cells = []
        for row in statistics["tests"]["pairs"]:
            if {row["a"], row["b"]} != {better, worse}:
                continue
            holds = row["a"] == better and row["p_adjusted"] <= statistics["tests"]["alpha"]
            cells.append(f"{row['level']} {row['method']} "
                         f"{'yes' if holds else 'no'} (p {row['p_adjusted']:.3f})")
        parts.append(f"{better} over {worse}: {', '.join(cells)}")
    return "Survives the tests (Holm-adjusted, alpha 0.05): " + "; ".join(parts) + "."


def page(shared: Path) -> str:
    lines = ["# Meta-evaluation with error bars", "",
             "Generated by `python bench/meta_eval_tables.py` from the public data the papers "
             "released; no number here is typed by hand. Every table is one `sumbench "
             "meta-eval` run with `" + " ".join(SETTINGS) + "`: per metric, level and method "
             "the correlation with the human Pyramid scores, its 95% bootstrap interval over "
             "systems and inputs, its significance cluster, and the Holm-adjusted "
             "permutation p-value against each other metric "
             "([evaluators](evaluators.md)).", ""]
    for title in GROUPS:
        lines += [section(shared, title), ""]
    return "\n".join(lines)


def section(shared: Path, title: str) -> str:
    """One group's section of the page."""
    from leaderboard.meta_eval_stats import format_statistics

    statistics = run_group(shared, GROUPS[title])
    return "\n".join([f"## {title}", "", format_statistics(statistics, markdown=True), "",
                      surviving(statistics, COMPARISONS[title])])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", type=Path, default=DEFAULT_SHARED)
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "docs" / "meta-evaluation.md")
    args = parser.parse_args(argv)
    args.out.write_text(page(args.shared), encoding="utf-8")
    print(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
