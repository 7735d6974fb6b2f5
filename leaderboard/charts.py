"""Per-part bar charts with confidence intervals, as PNG bytes (matplotlib, Agg backend).

Deterministic: the same rows give the same bytes (no timestamps or software tags in the PNG
metadata, fixed size and resolution), so a process keeps the charts it drew last and draws
again only what changed (a board is rebuilt after every score and analysis; its chart changes
only when its top entries do). A missing or undefined value gets no bar: it is never drawn
as 0.
"""
from __future__ import annotations

import functools
import io
import json
from collections.abc import Mapping, Sequence

MAX_ROWS = 10
#: charts a process keeps, by what they show (a few boards' latest, a few kilobytes each)
KEPT_CHARTS = 32


def _drawn_once(draw):
    """`draw(*args, **options)`, kept by the JSON text of its arguments: a chart asked for
    again with the same contents is the same bytes, not drawn anew (arguments JSON cannot
    hold are drawn every time)."""
    @functools.lru_cache(maxsize=KEPT_CHARTS)
    def kept(arguments: str) -> bytes:
        args, options = json.loads(arguments)
        return draw(*args, **options)

    @functools.wraps(draw)
    def chart(*args, **options) -> bytes:
        try:
            arguments = json.dumps([args, options], sort_keys=True, allow_nan=True)
        except (TypeError, ValueError):
            return draw(*args, **options)
        return kept(arguments)

    chart.cache_info = kept.cache_info
    return chart


def chart_bars(rows: Sequence[Mapping], parts: Sequence[str]) -> list[dict]:
    """The bars to draw: one per (row, part) with a value; what `task_bar_chart` plots."""
    bars = []
    for row_index, row in enumerate(rows[:MAX_ROWS]):
        for part_index, part in enumerate(parts):
            value = row["values"].get(part)
            if value is None:
                continue
            ci = (row.get("ci95") or {}).get(part)
            bars.append({"row": row_index, "part": part_index, "value": float(value),
                         "ci95": list(ci) if ci else None})
    return bars


@_drawn_once
def task_bar_chart(rows: Sequence[Mapping], parts: Sequence[str], *, title: str,
                   value_label: str = "headline (x100)") -> bytes:
    """Grouped bars per part, one colour per row (at most MAX_ROWS), error bars from
    `ci95`. rows: [{"label": str, "values": {part: float|None}, "ci95": {part: [lo, hi]}}]."""
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    figure = Figure(figsize=(max(6.0, 1.2 * len(parts) + 2), 4.2), dpi=100)
    axes = figure.add_subplot(1, 1, 1)
    shown = list(rows[:MAX_ROWS])
    width = 0.8 / max(1, len(shown))
    colours = matplotlib.colormaps["tab10"]
    for row_index, row in enumerate(shown):
        bars = [bar for bar in chart_bars(shown, parts) if bar["row"] == row_index]
        xs = [bar["part"] - 0.4 + width * (row_index + 0.5) for bar in bars]
        heights = [bar["value"] for bar in bars]
        errors = [[max(0.0, bar["value"] - bar["ci95"][0]) if bar["ci95"] else 0.0
                   for bar in bars],
                  [max(0.0, bar["ci95"][1] - bar["value"]) if bar["ci95"] else 0.0
                   for bar in bars]]
        axes.bar(xs, heights, width=width, yerr=errors, capsize=2,
                 color=colours(row_index % 10), label=plain(str(row["label"])[:40]))
    axes.set_xticks(range(len(parts)))
    axes.set_xticklabels([_short(part) for part in parts], rotation=20, ha="right",
                         fontsize=8)
    axes.set_ylabel(value_label)
    axes.set_title(plain(title), fontsize=10)
    if shown:
        axes.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", metadata={"Software": None})
    return buffer.getvalue()


def plain(text: str) -> str:
    """Text as matplotlib shows it literally: a "$" would open math markup (and a model name
    holding a bad formula would fail the chart, and the board's rebuild with it)."""
    return text.replace("$", r"\$")


def _short(name: str) -> str:
    return name.replace("_", " ")


def pareto_front(points: Sequence[Mapping]) -> list[int]:
    """Indices of the points no other point beats: none has a score at least as high for
    at most as many seconds, better in one of the two. points: [{"score", "seconds"}]."""
    front = []
    for index, point in enumerate(points):
        beaten = any(other["score"] >= point["score"] and other["seconds"] <= point["seconds"]
                     and (other["score"] > point["score"] or other["seconds"] < point["seconds"])
                     for other in points)
        if not beaten:
            front.append(index)
    return front


@_drawn_once
def cost_chart(points: Sequence[Mapping], *, title: str) -> bytes:
    """Aggregate score against the seconds an evaluation took (log scale), one labelled dot
    per entry, the Pareto front drawn as a step line. points: [{"label", "score",
    "seconds"}]."""
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    figure = Figure(figsize=(7.0, 4.2), dpi=100)
    axes = figure.add_subplot(1, 1, 1)
    front = set(pareto_front(points))
    for index, point in enumerate(points):
        on_front = index in front
        axes.scatter([point["seconds"]], [point["score"]], s=36 if on_front else 18,
                     color="#c62828" if on_front else "#546e7a", zorder=3)
        axes.annotate(plain(str(point["label"])[:30]), (point["seconds"], point["score"]),
                      fontsize=7, xytext=(4, 3), textcoords="offset points")
    line = sorted((points[i] for i in front), key=lambda p: p["seconds"])
    if len(line) > 1:
        axes.step([p["seconds"] for p in line], [p["score"] for p in line], where="post",
                  color="#c62828", linewidth=1, label="Pareto front")
        axes.legend(fontsize=7, loc="lower right")
    axes.set_xscale("log")
    axes.set_xlabel("seconds of the evaluation (measured by the server)")
    axes.set_ylabel("aggregate (x100)")
    axes.set_title(plain(title), fontsize=10)
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", metadata={"Software": None})
    return buffer.getvalue()


def forest_plot(statistics: Mapping) -> bytes:
    """Meta-eval's forest plot (PNG bytes): a panel per level and method, each metric's
    correlation with its interval, best first, coloured by significance cluster (one colour
    when no test ran). `statistics`: what `sumbench meta-eval --out` keeps under it."""
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    correlations = statistics["correlations"]
    bounds = statistics["intervals"]["intervals"]
    clusters = (statistics.get("tests") or {}).get("clusters")
    cells = [(level, method) for level, methods in next(iter(correlations.values())).items()
             for method in methods]
    figure = Figure(figsize=(5.2 * len(cells), 0.45 * len(correlations) + 1.6), dpi=100)
    colours = matplotlib.colormaps["tab10"]
    for index, (level, method) in enumerate(cells, start=1):
        axes = figure.add_subplot(1, len(cells), index)
        ranked = sorted(correlations, key=lambda label: _sort_key(
            correlations[label][level][method]))
        for row, label in enumerate(ranked):
            r, (lower, upper) = correlations[label][level][method], bounds[label][level][method]
            cluster = clusters[label][level][method] if clusters else 1
            if r is None or lower is None:
                continue
            axes.errorbar([r], [row], xerr=[[max(0.0, r - lower)], [max(0.0, upper - r)]],
                          fmt="o", capsize=3, color=colours((cluster - 1) % 10),
                          label=f"cluster {cluster}" if clusters else None)
        axes.set_yticks(range(len(ranked)))
        axes.set_yticklabels([plain(label)[:32] for label in ranked], fontsize=8)
        axes.set_title(f"{level} {method}", fontsize=10)
        axes.set_xlabel("correlation with humans", fontsize=8)
        if clusters:
            handles, names = axes.get_legend_handles_labels()
            unique = dict(zip(names, handles))
            axes.legend(unique.values(), unique.keys(), fontsize=7, loc="lower right")
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", metadata={"Software": None})
    return buffer.getvalue()


def _sort_key(value) -> float:
    """Worst first (the best on top of the panel); an undefined value at the bottom."""
    return float("-inf") if value is None or value != value else float(value)
