"""Experiment figures (matplotlib, Agg backend, imported inside functions; no timestamps in
the PNG metadata, so the same numbers give the same bytes)."""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path


def _figure(width: float, height: float):
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), dpi=100)


def _save(figure, path: Path) -> None:
    figure.tight_layout()
    figure.savefig(path, format="png", metadata={"Software": None})


def heatmap(rows: Sequence[str], columns: Sequence[str],
            values: Mapping[str, Mapping[str, float | None]], path: Path, *, title: str,
            label: str) -> None:
    """An annotated grid (rows x columns); missing values are blank with "n/a"."""
    import numpy as np

    grid = np.array([[values[r].get(c) if values[r].get(c) is not None else np.nan
                      for c in columns] for r in rows], dtype=float)
    figure = _figure(1.3 * len(columns) + 2.5, 0.7 * len(rows) + 1.8)
    axes = figure.add_subplot(1, 1, 1)
    image = axes.imshow(np.ma.masked_invalid(grid), cmap="viridis", aspect="auto")
    figure.colorbar(image, ax=axes, label=label)
    axes.set_xticks(range(len(columns)), labels=columns, rotation=30, ha="right")
    axes.set_yticks(range(len(rows)), labels=rows)
    axes.set_xlabel("test domain")
    axes.set_ylabel("training domain")
    for i in range(len(rows)):
        for j in range(len(columns)):
            text = "n/a" if math.isnan(grid[i, j]) else f"{grid[i, j]:.1f}"
            axes.text(j, i, text, ha="center", va="center", color="white", fontsize=8)
    axes.set_title(title, fontsize=10)
    _save(figure, path)


def delta_bars(rows: Sequence[str], columns: Sequence[str], tasks: Sequence[str],
               deltas: Mapping[str, Mapping[str, Mapping[str, float | None]]], path: Path, *,
               title: str) -> None:
    """Table 4 style: one panel per task, bars of (test domain x training domain) deltas."""
    figure = _figure(3.2 * min(4, len(tasks)) + 1, 2.8 * math.ceil(len(tasks) / 4) + 0.8)
    import matplotlib
    colours = matplotlib.colormaps["tab10"]
    width = 0.8 / max(1, len(rows))
    for index, task in enumerate(tasks):
        axes = figure.add_subplot(math.ceil(len(tasks) / 4), min(4, len(tasks)), index + 1)
        for r, row in enumerate(rows):
            xs, heights = [], []
            for c, column in enumerate(columns):
                value = deltas[row].get(column, {}).get(task)
                if value is not None:
                    xs.append(c - 0.4 + width * (r + 0.5))
                    heights.append(value)
            axes.bar(xs, heights, width=width, color=colours(r % 10), label=row)
        axes.axhline(0, color="black", linewidth=0.6)
        axes.set_xticks(range(len(columns)), labels=columns, rotation=40, ha="right",
                        fontsize=7)
        axes.set_title(task.replace("_", " "), fontsize=8)
    figure.axes[0].legend(fontsize=6, title="trained on", title_fontsize=6)
    figure.suptitle(title, fontsize=10)
    _save(figure, path)


def curves(x: Sequence[float], series: Mapping[str, Sequence[tuple[float | None, float]]],
           path: Path, *, title: str, xlabel: str, ylabel: str = "headline (x100)",
           log_x: bool = True) -> None:
    """One line per series: (mean, spread) at each x; undefined means are gaps."""
    figure = _figure(7, 4.2)
    axes = figure.add_subplot(1, 1, 1)
    for name, points in series.items():
        pairs = [(xv, mean, spread) for xv, (mean, spread) in zip(x, points) if mean is not None]
        if not pairs:
            continue
        xs, means, spreads = zip(*pairs)
        axes.errorbar(xs, means, yerr=spreads, marker="o", capsize=3, label=name)
    if log_x:
        axes.set_xscale("log")
    axes.set_xticks(list(x), labels=[f"{value:g}" for value in x])
    axes.set_xlabel(xlabel)
    axes.set_ylabel(ylabel)
    axes.set_title(title, fontsize=10)
    axes.legend(fontsize=7, loc="best")
    _save(figure, path)
