"""`sumbench view` at USB's test size: two runs of about 17,600 records each (the shared
fixture's sample predictions of every task repeated under new ids; run B's texts one word
shorter at random and its probabilities moved), the page built, then opened and filtered in
Chromium (Debian's, headless) `--repeat` times: median seconds to build, to open (the page's
own load, first render included) and the slowest of three filters (a task, the gap sort, a
search), each as the page times its filtering, sorting and rendering. Goal: opens in under
3 s, filters in under 0.2 s.

    python bench/view_speed.py [--records 17600] [--repeat 5] [--json]
"""
from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO))
from harness import add_options, machine  # noqa: E402

SHARED = Path(os.environ.get("SUMBENCH_SHARED", REPO.parent / "shared"))
PREDICTIONS = SHARED / "fixtures" / "usb" / "predictions"
CHROMIUM = "/usr/bin/chromium"


def write_runs(root: Path, records: int) -> int:
    """Runs a and b under `root` with at least `records` records each; how many."""
    fixture = {path.name: [json.loads(line) for line in path.read_text().splitlines()]
               for path in sorted(PREDICTIONS.glob("*.jsonl"))}
    per_copy = sum(len(lines) for lines in fixture.values())
    copies, rng = -(-records // per_copy), random.Random(0)
    for name in ("a", "b"):
        (root / name / "predictions").mkdir(parents=True)
    for file_name, lines in fixture.items():
        out = {"a": [], "b": []}
        for copy in range(copies):
            for record in lines:
                record = {**record, "id": f"{record['id']}-{copy}"}
                out["a"].append(json.dumps(record))
                out["b"].append(json.dumps({**record, "prediction": _moved(
                    record["prediction"], rng)}))
        for name in ("a", "b"):
            (root / name / "predictions" / file_name).write_text("\n".join(out[name]) + "\n")
    return copies * per_copy


def _moved(prediction, rng: random.Random):
    if isinstance(prediction, str):
        words = prediction.split()
        return " ".join(words[:-1] if words and rng.random() < 0.5 else words)
    return [min(1.0, max(0.0, value + rng.uniform(-0.3, 0.3))) for value in prediction]


def browser_timings(page_path: Path, repeat: int) -> dict:
    from playwright.sync_api import sync_playwright

    loads, filters = [], []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=[
            "--no-sandbox", "--disable-gpu", "--disable-background-networking"])
        try:
            for _ in range(repeat):
                page = browser.new_page(viewport={"width": 1280, "height": 800})
                started = time.perf_counter()
                page.goto(page_path.as_uri())
                page.wait_for_function("window.sumbenchView && window.sumbenchView.timings.load")
                loads.append(time.perf_counter() - started)
                spent = 0.0  # the page's own time to filter, sort and render, each action
                for method, selector, value in (
                        ("select_option", "#task", "factuality_classification"),
                        ("select_option", "#sort", "gap-abs"), ("fill", "#search", "companies")):
                    getattr(page, method)(selector, value)
                    spent = max(spent, page.evaluate(
                        "window.sumbenchView.timings.filter + window.sumbenchView.timings.render"))
                filters.append(spent / 1000)
                page.close()
        finally:
            browser.close()
    return {"open_s": round(statistics.median(loads), 3),
            "filter_s": round(statistics.median(filters), 3)}


def main(argv: list[str] | None = None) -> int:
    from benchmark.viewer import write_view

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=17_600)
    add_options(parser)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        records = write_runs(root, args.records)
        builds = []
        for _ in range(args.repeat):
            started = time.perf_counter()
            summary = write_view([root / "a", root / "b"], root / "view.html")
            builds.append(time.perf_counter() - started)
        line = {"benchmark": "view_speed", "records": records, "items": summary["items"],
                "page_mib": round(summary["bytes"] / 2**20, 1),
                "build_s": round(statistics.median(builds), 2),
                **browser_timings(root / "view.html", args.repeat), "identical": True,
                "machine": machine()}
    line["goal_met"] = line["open_s"] < 3 and line["filter_s"] < 0.2
    print(json.dumps(line, sort_keys=True) if args.json else json.dumps(line, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
