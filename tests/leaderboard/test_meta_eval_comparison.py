"""`sumbench meta-eval` with several metrics in one table, `--human qapyramid:FILE` and
per-system score files: QAPyramid's Table 4 system-level CHRF and GEval rows reproduced
exactly from its Table 6 (shared data); each metric of a comparison equal to its own run;
QAPyramid's human scores equal to a score file of the same values; bad input refused in one
line with nothing written."""
from __future__ import annotations

import json
import math

import pytest

from leaderboard.evaluators.qapyramid.scoring import human_qapyramid
from leaderboard.meta_eval import meta_evaluate, qapyramid_human
from tasks.metrics.correlation import correlation
from tasks.qapyramid.judgments import load_qa_judgments

from helpers import files_under, sumbench
from lb_helpers import SYSTEMS, write_pyramid_folder

# QAPyramid (Zhang et al.), Table 4, system-level Kendall tau: the rows whose Table 6 values
# have no ties, as printed (three decimals). "All" is sumbench's "all" group.
TABLE4 = {"CHRF": {"FT": 0.800, "LLM": -0.200, "all": 0.289},
          "GEval": {"FT": 0.600, "LLM": 0.000, "all": 0.422}}
# QAPyramid human system means from QA_presence.json (strict majority, ties absent), as the
# shared data's README and the metrics spec (§1) give them
QAPYRAMID_MEANS = {"bart": .5095, "pegasus": .4634, "brio": .5639, "brio-ext": .5548,
                   "matchsum": .5049, "llama-3-8b-instruct": .5448,
                   "llama-3-70b-instruct": .5263, "mixtral-8x7b-instruct-v0.1": .4809,
                   "mixtral-8x22b-instruct-v0.1": .4782, "GPT4": .5484}
FT = ["bart", "pegasus", "brio", "brio-ext", "matchsum"]
LLM = ["llama-3-8b-instruct", "llama-3-70b-instruct", "mixtral-8x7b-instruct-v0.1",
       "mixtral-8x22b-instruct-v0.1", "GPT4"]


def run_json(capsys, *argv) -> tuple[dict, str]:
    code, printed, err = sumbench(capsys, "meta-eval", *argv)
    assert code == 0, err
    return json.loads(printed), err


# ---- Table 4 from Table 6 (shared data) ---------------------------------------------------------
@pytest.fixture(scope="module")
def table6(shared_dir):
    path = shared_dir / "data" / "qapyramid" / "qapyramid_table6.json"
    if not path.is_file():
        pytest.skip(f"shared data not found at {path}")
    return json.loads(path.read_text())


def test_table4_chrf_and_geval_rows_from_table6(table6, qapyramid_judgments, tmp_path,
                                                capsys):
    assert table6["groups"] == {"FT": FT, "LLM": LLM}  # the names the judgments use
    files = []
    for row in TABLE4:
        files.append(tmp_path / f"{row}.json")
        files[-1].write_text(json.dumps(table6["table6"][row], indent=1))
    groups = tmp_path / "groups.json"
    groups.write_text(json.dumps(table6["groups"]))
    out = tmp_path / "out.json"
    result, table = run_json(capsys, "--metric", files[0], "--metric", files[1], "--human",
                             f"qapyramid:{qapyramid_judgments}", "--groups", groups,
                             "--out", out)
    assert list(result) == ["CHRF", "GEval"]
    for row, expected in TABLE4.items():
        printed = {group: round(result[row][group]["system"]["kendall"], 3)
                   for group in expected}
        assert printed == expected, row
        recorded = table6["table4_system_kendall"][row]
        assert printed == {"FT": recorded["FT"], "LLM": recorded["LLM"],
                           "all": recorded["All"]}
        assert all(result[row][group]["summary"] is None for group in expected)
    assert result["CHRF"]["all"]["systems"] == list(QAPYRAMID_MEANS)[:5] + [
        "mixtral-8x22b-instruct-v0.1", "llama-3-8b-instruct", "GPT4",
        "llama-3-70b-instruct", "mixtral-8x7b-instruct-v0.1"]  # the judgments' order
    lines = table.splitlines()
    assert lines[0].split() == ["metric", "group", "level", "n_sys", "kendall", "pearson",
                                "spearman"]
    assert lines[1].split()[:5] == ["CHRF", "FT", "system", "5", "0.8000"]
    assert lines[2].split() == ["CHRF", "FT", "summary", "5", "n/a", "n/a", "n/a"]
    assert lines[11].split()[:5] == ["GEval", "all", "system", "10", "0.4222"]
    written = json.loads(out.read_text())
    human = written["system_means"]["human"]
    assert {system: round(value, 4) for system, value in human.items()} == QAPYRAMID_MEANS
    assert written["system_means"]["metrics"]["GEval"] == table6["table6"]["GEval"]
    assert written["config"]["metrics"] == [
        {"metric": str(files[0]), "label": "CHRF", "kind": "per-system score file"},
        {"metric": str(files[1]), "label": "GEval", "kind": "per-system score file"}]


def test_qapyramid_human_is_the_qapyramid_command_s_scores(qapyramid_judgments):
    ids, per_example = qapyramid_human(qapyramid_judgments)
    report = human_qapyramid(load_qa_judgments(qapyramid_judgments))
    assert len(ids) == 50 and list(per_example) == list(report["systems"])
    for system, scores in per_example.items():
        assert scores == [report["per_example"][system][i] for i in ids]
        assert sum(scores) / len(scores) == pytest.approx(report["systems"][system], abs=1e-15)
        assert round(report["systems"][system], 4) == QAPYRAMID_MEANS[system]


# ---- tiny data: a Pyramid folder, judgments for it, and the same scores as a file ------------
# example -> the votes on its four QAs for system alpha, beta, gamma (ties count as absent)
VOTES = {
    "alpha": [[1, 1, 0], [1, 0], [1], [0, 1, 1]],
    "beta": [[1, 0, 1], [1, 1], [0], [1, 0, 1, 0]],
    "gamma": [[0, 0, 0], [0, 1], [0], [1, 1, 1]],
}
BY_HAND = {"alpha": 3 / 4, "beta": 2 / 4, "gamma": 1 / 4}  # strict majority, ties absent


def judgments_for(ids, systems=SYSTEMS, shift=True) -> dict:
    """QA_presence.json's shape: example i rotates the vote lists by i and keeps 3 or 4 of
    them (so scores vary), or (not `shift`) keeps them as they are."""
    data = {}
    for system in systems:
        data[system] = {}
        for i, example in enumerate(ids):
            rotated = VOTES[system][i % 4:] + VOTES[system][:i % 4]
            votes = rotated[:3 + i % 2] if shift else VOTES[system]
            qas = {f"What happened {k}? thing {k}": [[f"A{n}", v] for n, v in enumerate(row)]
                   for k, row in enumerate(votes)}
            data[system][example] = {f"{example}_0": dict(list(qas.items())[:2]),
                                     f"{example}_1": dict(list(qas.items())[2:])}
    return data


@pytest.fixture()
def lab(tmp_path):
    pyramid = write_pyramid_folder(tmp_path / "pyramid", n_examples=6)
    ids = (pyramid / "ids.txt").read_text().split()
    judgments = tmp_path / "QA_presence.json"
    judgments.write_text(json.dumps(judgments_for(ids), indent=1))
    return {"pyramid": pyramid, "ids": ids, "judgments": judgments, "tmp": tmp_path}


def test_strict_majority_with_ties_absent_by_hand(lab):
    flat = lab["tmp"] / "flat.json"
    flat.write_text(json.dumps(judgments_for(lab["ids"][:1], shift=False)))
    ids, scores = qapyramid_human(flat)
    assert ids == lab["ids"][:1]
    assert scores == {system: [value] for system, value in BY_HAND.items()}


def test_qapyramid_human_equals_the_same_scores_as_a_file(lab, capsys):
    ids, human = qapyramid_human(lab["judgments"], lab["ids"])
    human_file = lab["tmp"] / "human.json"
    human_file.write_text(json.dumps(human))
    common = ["--pyramid", lab["pyramid"], "--metric", "rouge1_recall"]
    by_kind, _ = run_json(capsys, *common, "--human", f"qapyramid:{lab['judgments']}")
    by_file, _ = run_json(capsys, *common, "--human", human_file)
    assert by_kind == by_file and by_kind["all"]["summary"]["kendall"] is not None
    labels, _ = run_json(capsys, *common)  # the folder's SCU labels: another human side
    assert labels != by_kind


def test_several_metrics_one_table_each_as_its_own_run(lab, capsys):
    ids = lab["ids"]
    per_example = lab["tmp"] / "lengths.json"  # keyed by id, listed in reverse
    per_example.write_text(json.dumps({s: {i: float(len(s) * (n + 1) % 5) for n, i in
                                           reversed(list(enumerate(ids)))} for s in SYSTEMS}))
    per_system = lab["tmp"] / "votes.json"
    per_system.write_text(json.dumps({"gamma": 0.1, "alpha": 0.9, "beta": 0.4}))
    groups = lab["tmp"] / "groups.json"
    groups.write_text(json.dumps({"top": ["alpha", "beta"]}))
    human = ["--human", f"qapyramid:{lab['judgments']}", "--groups", groups]
    metrics = ["rouge1_recall", "chrf", str(per_example), str(per_system)]
    out = lab["tmp"] / "out.json"
    argv = ["--pyramid", lab["pyramid"], *human, "--metric-option", "chrf:word_order=2"]
    together, table = run_json(capsys, *argv, *[a for m in metrics for a in ("--metric", m)],
                               "--out", out, "--table", "markdown")
    assert list(together) == ["rouge1_recall", "chrf", "lengths", "votes"]
    for metric, label in zip(metrics, together):
        options = ["--metric-option", "word_order=2"] if metric == "chrf" else []
        alone, _ = run_json(capsys, "--pyramid", lab["pyramid"], *human, "--metric", metric,
                            *options)
        assert together[label] == alone, label
    assert together["votes"]["top"]["summary"] is None
    human_means = json.loads(out.read_text())["system_means"]["human"]
    assert together["votes"]["all"]["system"]["kendall"] == correlation(
        [0.9, 0.4, 0.1], [human_means[s] for s in SYSTEMS], "kendall")
    assert together["lengths"]["all"]["summary"]["pearson"] is not None
    written = json.loads(out.read_text())
    settings = {entry["label"]: entry for entry in written["config"]["metrics"]}
    assert settings["chrf"]["settings"]["word_order"] == 2
    assert settings["rouge1_recall"]["kind"] == "evaluator"
    assert settings["lengths"]["kind"] == "score file" and "settings" not in settings["lengths"]
    assert written["system_means"]["metrics"]["votes"] == {"gamma": 0.1, "alpha": 0.9,
                                                           "beta": 0.4}
    assert written["correlations"] == together
    assert table.splitlines()[0] == ("| metric | group | level | n_sys | kendall | pearson "
                                     "| spearman |")
    assert "| votes | top | summary | 2 | n/a | n/a | n/a |" in table


def test_one_metric_keeps_its_output_and_a_per_system_file_has_no_summary_level(lab, capsys):
    per_system = lab["tmp"] / "votes.json"
    per_system.write_text(json.dumps({"alpha": 3, "beta": 2, "gamma": 1}))
    out = lab["tmp"] / "out.json"
    result, table = run_json(capsys, "--pyramid", lab["pyramid"], "--metric", per_system,
                             "--out", out)
    assert list(result) == ["all"] and result["all"]["summary"] is None
    assert result["all"]["system"]["kendall"] == pytest.approx(1.0)  # labels: alpha best
    assert table.splitlines()[0].split()[:3] == ["group", "level", "n_sys"]
    assert table.splitlines()[2].split() == ["all", "summary", "3", "n/a", "n/a", "n/a"]
    written = json.loads(out.read_text())
    assert written["config"]["metric"] == str(per_system)
    assert written["system_means"]["metric"] == {"alpha": 3.0, "beta": 2.0, "gamma": 1.0}


def test_without_a_pyramid_folder_per_example_files_align_by_judged_example(lab, capsys):
    ids, human = qapyramid_human(lab["judgments"])
    assert ids == lab["ids"]
    metric = {s: [v * 2 - (n % 3) for n, v in enumerate(human[s])] for s in SYSTEMS}
    path = lab["tmp"] / "metric.json"
    path.write_text(json.dumps({s: dict(reversed(list(zip(ids, v)))) for s, v in
                                metric.items()}))
    result, _ = run_json(capsys, "--metric", path, "--human", f"qapyramid:{lab['judgments']}",
                         "--systems", "gamma", "alpha", "beta")
    expected = meta_evaluate(metric, human)["all"]
    assert result["all"]["system"] == pytest.approx(expected["system"])
    assert result["all"]["summary"] == pytest.approx(expected["summary"])
    assert not math.isnan(expected["summary"]["kendall"])


@pytest.mark.parametrize("names, given, expected", [
    (["chrf"], [("word_order", "2")], {"chrf": {"word_order": "2"}}),
    (["chrf", "a.json"], [("word_order", "2")], {"chrf": {"word_order": "2"}, "a.json": {}}),
    (["chrf", "meteor"], [("meteor:alpha", "0.8"), ("chrf:beta", "3")],
     {"chrf": {"beta": "3"}, "meteor": {"alpha": "0.8"}}),
    (["chrf"], [("meteor:alpha", "0.8")], {"chrf": {"meteor:alpha": "0.8"}}),  # chrf refuses it
])
def test_each_metric_option_reaches_its_evaluator(names, given, expected):
    from benchmark.commands.meta_eval import options_by_metric

    assert options_by_metric(names, given, {"chrf", "meteor"}) == expected


# ---- bad input: one line naming the file, line or field; nothing written ---------------------
def _write(tmp, name, content) -> str:
    path = tmp / name
    path.write_text(content if isinstance(content, str) else json.dumps(content, indent=1))
    return str(path)


def _qapyramid(tmp, content, name="QA.json") -> str:
    return f"qapyramid:{_write(tmp, name, content)}"


MALFORMED = '{"alpha": {\n  "e1": [\n}'
BAD_VOTE = {"alpha": {"e1": {"e1_0": {"Who? x": [["A1", 2]]}}}}
UNEVEN = {**judgments_for(["e1", "e2"], SYSTEMS[:1]), **judgments_for(["e1"], SYSTEMS[1:])}
ONE_SYSTEM = {"alpha": 1.0}

BAD_CASES = [
    ("per-system-not-a-number",
     lambda t, j, p: ["--metric", _write(t, "chrf.json", {"alpha": 1.0, "beta": "high",
                                                          "gamma": 0.5}), "--human", j],
     "chrf.json:3, field 'beta': expected a finite number (a per-system file holds one per "
     "system), got \"high\""),
    ("per-system-not-finite",
     lambda t, j, p: ["--metric", _write(t, "chrf.json", '{"alpha": 1.0,\n "beta": NaN}'),
                      "--human", j],
     "chrf.json:2, field 'beta': expected a finite number"),
    ("per-system-misses-a-system",
     lambda t, j, p: ["--metric", _write(t, "chrf.json", {"alpha": 1.0, "beta": 2.0}),
                      "--human", j],
     "chrf.json: no scores for system(s) gamma"),
    ("systems-missing-from-the-human-file",
     lambda t, j, p: ["--metric", _write(t, "m.json", {"alpha": 1.0}), "--human", j,
                      "--systems", "alpha", "delta"],
     "QA_presence.json: no judgments for system(s) delta (the file has alpha, beta, gamma)"),
    ("pyramid-systems-missing-from-the-human-file",
     lambda t, j, p: ["--pyramid", p, "--metric", "rouge1_recall", "--human",
                      _qapyramid(t, judgments_for(["ex00"], SYSTEMS[:2]), "two.json")],
     "two.json: no judgments for system(s) gamma"),
    ("pyramid-examples-missing-from-the-human-file",
     lambda t, j, p: ["--pyramid", p, "--metric", "rouge1_recall", "--human",
                      _qapyramid(t, judgments_for(["ex00"]), "one.json")],
     "one.json, field 'alpha': no judgments for example(s) ex01, ex02, ex03, ex04, ex05"),
    ("group-with-a-system-the-human-file-lacks",
     lambda t, j, p: ["--metric", _write(t, "m.json", {"alpha": 1.0, "beta": 2, "gamma": 3}),
                      "--human", j, "--groups", _write(t, "g.json", {"llm": ["GPT4"]})],
     "g.json, field 'llm': unknown systems GPT4 (known: alpha, beta, gamma)"),
    ("unknown-human-kind",
     lambda t, j, p: ["--metric", _write(t, "m.json", {"alpha": 1.0}), "--human",
                      "rose:acu.json"],
     "--human 'rose:acu.json': unknown kind 'rose' (known: qapyramid:FILE; or 'pyramid', or "
     "a JSON score file)"),
    ("malformed-judgments-json",
     lambda t, j, p: ["--metric", _write(t, "m.json", {"alpha": 1.0}), "--human",
                      _qapyramid(t, MALFORMED)],
     "QA.json:3: malformed JSON"),
    ("judgments-vote-not-0-or-1",
     lambda t, j, p: ["--metric", _write(t, "m.json", {"alpha": 1.0}), "--human",
                      _qapyramid(t, BAD_VOTE)],
     "QA.json, field '[\"alpha\"][\"e1\"][\"e1_0\"][\"Who? x\"][0]': vote 0 is [\"A1\", 2]"),
    ("judgments-not-an-object",
     lambda t, j, p: ["--metric", _write(t, "m.json", {"alpha": 1.0}), "--human",
                      _qapyramid(t, [1, 2])],
     "QA.json, field '(top level)': expected a JSON object of systems, got array"),
    ("judged-on-different-examples",
     lambda t, j, p: ["--metric", _write(t, "m.json", {"alpha": 1.0}), "--human",
                      _qapyramid(t, UNEVEN)],
     "QA.json: the systems are not scored on the same examples: 2 of 3 lack some of the 2 "
     "examples (first: 'beta' lacks 1, e.g. 'e2')"),
    ("per-example-file-lacks-a-judged-example",
     lambda t, j, p: ["--metric", _write(t, "m.json", {s: {"ex00": 0.5} for s in SYSTEMS}),
                      "--human", j],
     "m.json, field 'alpha': no score for example(s) ex01, ex02, ex03, ex04, ex05"),
    ("human-pyramid-needs-the-folder",
     lambda t, j, p: ["--metric", _write(t, "m.json", {"alpha": 1.0})],
     "--pyramid DIR is needed (summaries, references, ids and human labels) unless --human "
     "is qapyramid:FILE"),
    ("evaluator-needs-the-folder",
     lambda t, j, p: ["--metric", "chrf", "--human", j],
     "--metric chrf scores summaries: give --pyramid DIR with the systems' summaries"),
    ("metric-given-twice",
     lambda t, j, p: ["--pyramid", p, "--metric", "chrf", "--metric", "chrf"],
     "--metric chrf is given twice"),
    ("option-of-which-evaluator",
     lambda t, j, p: ["--pyramid", p, "--metric", "chrf", "--metric", "rouge1_recall",
                      "--metric-option", "word_order=2"],
     "--metric-option word_order=2: say which metric it sets, METRIC:word_order=VALUE "
     "(METRIC one of chrf, rouge1_recall)"),
    ("option-of-a-score-file",
     lambda t, j, p: ["--pyramid", p, "--metric", "chrf", "--metric",
                      _write(t, "m.json", {"alpha": 1.0}), "--metric-option",
                      f"{t / 'm.json'}:x=1"],
     "--metric-option sets an evaluator's options; a score file has none"),
    ("out-is-the-judgments-file",
     lambda t, j, p: ["--metric", _write(t, "m.json", {"alpha": 1.0}), "--human", j,
                      "--out", j.partition(":")[2]],
     "is the --human file"),
]


@pytest.mark.parametrize("build, message", [case[1:] for case in BAD_CASES],
                         ids=[case[0] for case in BAD_CASES])
def test_bad_input_is_one_line_and_nothing_is_written(lab, capsys, build, message):
    inputs = lab["tmp"] / "inputs"
    inputs.mkdir()
    argv = build(inputs, f"qapyramid:{lab['judgments']}", lab["pyramid"])
    if "--out" not in argv:
        argv += ["--out", lab["tmp"] / "out.json"]
    before = files_under(lab["tmp"])
    code, printed, err = sumbench(capsys, "meta-eval", *argv)
    assert code == 2 and message in err, err
    assert len(err.strip().splitlines()) == 1 and printed == ""
    assert files_under(lab["tmp"]) == before
