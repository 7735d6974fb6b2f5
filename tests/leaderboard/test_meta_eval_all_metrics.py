"""QAPyramid's comparison in one command: `meta-eval --metric meteor --metric chrf --metric
bertscore-r --metric bartscore-r --metric a2cu-r` on REALSumm's released data (its first
examples and five systems, to stay small), every model a tiny local folder: one table, each
metric's settings naming its models, and each correlation that of its own system means."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from bench.acu_official import build_classifier, build_deberta_tokenizer, build_generator
from tasks.metrics.correlation import correlation
from trainers.models.tiny import build_tiny_bert_encoder

from helpers import recorded_models, sumbench

EXAMPLES, SYSTEMS = 3, 5
LINE_FILES = ("ids.txt", "documents.txt", "references.txt", "SCUs.txt", "STUs.txt")
METRICS = ("meteor", "chrf", "bertscore-r", "bartscore-r", "a2cu-r")


def realsumm_subset(source: Path, root: Path) -> tuple[Path, list[str]]:
    """The first EXAMPLES examples of a REALSumm-layout folder and its first SYSTEMS
    systems, in the same layout."""
    root.mkdir(parents=True)
    for name in LINE_FILES:
        lines = (source / name).read_text(encoding="utf-8").splitlines()[:EXAMPLES]
        (root / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    systems = sorted(path.stem for path in (source / "summaries").glob("*.summary"))[:SYSTEMS]
    for folder, suffix in (("summaries", ".summary"), ("labels", ".label")):
        (root / folder).mkdir()
        for system in systems:
            lines = (source / folder / f"{system}{suffix}").read_text(
                encoding="utf-8").splitlines()[:EXAMPLES]
            (root / folder / f"{system}{suffix}").write_text("\n".join(lines) + "\n",
                                                             encoding="utf-8")
    return root, systems


@pytest.mark.slow
def test_the_papers_comparison_runs_in_one_command(pyramid_data_dir, wordnet_folder, tmp_path,
                                                   tmp_path_factory, capsys):
    folder, systems = realsumm_subset(pyramid_data_dir / "realsumm", tmp_path / "realsumm")
    texts = [line for path in folder.rglob("*.txt") for line in path.read_text().splitlines()]
    texts += [line for path in (folder / "summaries").iterdir()
              for line in path.read_text().splitlines()]
    bert = tmp_path / "bert"
    build_tiny_bert_encoder(texts, bert, seed=1, layers=3)
    generator = build_generator(texts, tmp_path / "generator")
    classifier = build_classifier(build_deberta_tokenizer(texts), tmp_path / "classifier")
    bart = recorded_models(tmp_path_factory, "bartscore_official", "build_model")
    options = {"meteor": {"wordnet": wordnet_folder},
               "bertscore-r": {"model": bert, "layer": 2, "device": "cpu"},
               "bartscore-r": {"model": bart, "max_length": 60, "device": "cpu"},
               "a2cu-r": {"generator": generator, "generator_tokenizer": generator,
                          "classifier": classifier, "classifier_tokenizer": classifier,
                          "device": "cpu"}}
    argv = ["--pyramid", folder, "--systems", *systems, "--out", tmp_path / "out.json"]
    argv += [argument for metric in METRICS for argument in ("--metric", metric)]
    argv += [argument for metric, values in options.items() for key, value in values.items()
             for argument in ("--metric-option", f"{metric}:{key}={value}")]
    code, printed, err = sumbench(capsys, "meta-eval", *argv)
    assert code == 0, err
    assert list(json.loads(printed)) == list(METRICS)
    rows = [line.split()[0] for line in err.splitlines() if line.split()[:1] and
            line.split()[0] in METRICS]
    written = json.loads((tmp_path / "out.json").read_text())
    settings = {entry["label"]: entry["settings"] for entry in written["config"]["metrics"]}
    assert settings["bertscore-r"]["model"] == str(bert)
    assert settings["bartscore-r"]["model"] == str(bart)
    assert settings["a2cu-r"]["classifier"] == str(classifier)
    assert settings["meteor"]["wordnet_version"] == "3.0"
    means = written["system_means"]
    for metric in METRICS:
        values = [means["metrics"][metric][system] for system in systems]
        expected = correlation(values, [means["human"][s] for s in systems], "kendall")
        found = written["correlations"][metric]["all"]["system"]["kendall"]
        assert found == expected or (found is None and math.isnan(expected)), metric
    assert list(dict.fromkeys(rows)) == list(METRICS)  # one table, a row group per metric
