"""SMUs (the SCU-approximation paper's sg2 AMR subgraphs): the released REALSumm `tree` lists
byte for byte from their recorded graphs, each rule and quirk on small graphs, bad graphs."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tasks.units.amr_units import fix_unlinked, raw_subgraphs, sentence_subgraphs

from helpers import sumbench

RELEASED = Path(__file__).resolve().parents[3] / "shared" / "data" / "scu_units" / "realsumm"


def test_the_pinned_penman_is_the_one_that_made_the_released_trees():
    import penman

    assert penman.__version__ == "1.2.1"


def test_every_released_realsumm_tree_byte_for_byte(tmp_path, capsys):
    released = RELEASED / "realsumm-smus-sg2.json"
    if not released.is_file():
        pytest.skip("../shared/data/scu_units is absent")
    out = tmp_path / "trees.json"
    code, printed, err = sumbench(capsys, "units", "smus", "--amr", str(released),
                                  "--trees-out", str(out))
    assert code == 0, err
    ours, theirs = json.loads(out.read_text()), json.loads(released.read_text())
    assert len(ours) == 100
    assert [record["tree"] for record in ours] == [record["tree"] for record in theirs]
    assert "1029 subgraphs for 100 references" in printed


def test_nodes_of_one_concept_share_a_group_rooted_at_the_first():
    graph = ("(a / and :op1 (s / say-01 :ARG0 (p / person) :ARG1 (x / thing)) "
             ":op2 (s2 / say-01 :ARG0 (q / person) :ARG1 (y / thing)))")
    (subgraph,) = raw_subgraphs(graph)
    assert subgraph.startswith("(s / say-01") and "(q / person)" in subgraph
    assert subgraph.count(":ARG0") == 2  # both nodes' edges, under the first one's variable


def test_without_a_two_argument_group_each_root_edge_to_a_node_is_a_subgraph():
    graph = "(s / sleep-01 :ARG0 (b / boy) :location (h / home) :polarity -)"
    assert raw_subgraphs(graph) == ["(s / sleep-01\n   :ARG0 (b / boy))",
                                    "(s / sleep-01\n   :location (h / home))"]


def test_a_purpose_edge_is_dropped_and_an_arg2_needs_company():
    graph = "(g / give-01 :ARG2 (b / boy) :purpose (h / help-01) :time (n / now))"
    assert raw_subgraphs(graph) == ["(g / give-01\n   :ARG2 (b / boy)\n   :time (n / now))"]


def test_an_unlinked_variable_is_instantiated_at_its_first_use():
    graph = ("(s / say-01 :ARG0 (p / person :name (n / name :op1 \"Ada\") :age 40) "
             ":ARG1 (l / leave-01 :ARG0 p :ARG1 (c / city)))")
    subgraph = "(l / leave-01\n   :ARG0 p\n   :ARG1 (c / city)\n   :ARG2 p)"
    assert fix_unlinked(graph, subgraph) == (
        "(l / leave-01\n   :ARG0 (p / person :name (n / name :op1 \"Ada\")))\n"
        "   :ARG1 (c / city)\n   :ARG2 p)")  # the authors' extra ) after a name not last
    assert sentence_subgraphs("(x / xyz-01 :ARG0 (a / a) :ARG1 (b / b))") == [
        "(x / xyz-01\n   :ARG0 (a / a)\n   :ARG1 (b / b))"]


def test_a_graph_that_does_not_parse_names_its_reference_and_sentence(tmp_path, capsys):
    amr = tmp_path / "amr.json"
    amr.write_text(json.dumps([{"instance_id": "r0", "summary": "A.", "summary_trees": [
        "(a / a)", "(b / b :ARG0"]}]))
    code, _, err = sumbench(capsys, "units", "smus", "--amr", str(amr), "--trees-out",
                            str(tmp_path / "t.json"))
    assert code == 2 and "field '[0].summary_trees'" in err and "sentence 2" in err, err
    assert not (tmp_path / "t.json").exists()
    amr.write_text(json.dumps([{"summary_trees": []}]))
    code, _, err = sumbench(capsys, "units", "smus", "--amr", str(amr), "--trees-out",
                            str(tmp_path / "t.json"))
    assert code == 2 and "no sentences" in err, err


def test_tags_go_in_by_plain_substring_replacement():
    from tasks.units.amr_units import oneline, tag_subgraph

    tagged = "(s / sleep-01~VBG :ARG0 (b / boy~NN) :ARG1 (p / person~NN))"
    subgraph = "(s / sleep-01\n   :ARG0 (b / boy)\n   :ARG1 (x / salesperson))"
    assert tag_subgraph(subgraph, tagged) == \
        "(s / sleep-01~VBG :ARG0 (b / boy~NN) :ARG1 (x / salesperson~NN))"  # the quirk
    assert tag_subgraph(subgraph, None) == oneline(subgraph) == \
        "(s / sleep-01 :ARG0 (b / boy) :ARG1 (x / salesperson))"


GRAPHS = ["(s / say-01 :ARG0 (p / person) :ARG1 (l / leave-01 :ARG0 p :ARG1 (c / city)))",
          "(g / give-01 :ARG0 (b / boy) :ARG1 (t / toy) :ARG2 (g2 / girl))"]
SAID_TAGGED = "(s / say-01~VBD :ARG0 (p / person~NN) :ARG1 (l / leave-01~VBN :ARG0 p :ARG1 " \
    "(c / city~NN)))"


@pytest.fixture(scope="module")
def generator(tmp_path_factory) -> str:
    """A tiny T5 AMR-to-text generator folder (random weights, outputs of 6 tokens)."""
    from trainers.models.tiny import build_tiny_t5, build_tiny_tokenizer

    folder = tmp_path_factory.mktemp("gen")
    tokenizer = build_tiny_tokenizer(GRAPHS * 5 + [SAID_TAGGED] * 5, vocab_size=300)
    model = build_tiny_t5(tokenizer, seed=2)
    model.config.task_specific_params = {"translation_amr_to_text": {"max_in_len": 64,
                                                                     "max_out_len": 6}}
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


def write_graphs(path: Path, graphs: list[str]) -> Path:
    path.write_text(json.dumps([{"instance_id": str(n), "summary": "x", "summary_trees": [g]}
                                for n, g in enumerate(graphs)]))
    return path


def generated(generator: str, inputs: list[str]) -> list[str]:
    from leaderboard.evaluators.units.amr_text import load_amr_generator

    return load_amr_generator(generator, "cpu").generate(inputs)


def test_with_a_generator_each_tagged_subgraph_becomes_an_smu(tmp_path, capsys, generator):
    from tasks.units.amr_units import tag_subgraph

    amr = write_graphs(tmp_path / "amr.json", GRAPHS)
    (tmp_path / "tagged.json").write_text(json.dumps([[SAID_TAGGED], [None]]))
    code, printed, err = sumbench(capsys, "units", "smus", "--amr", str(amr), "--amr-generator",
                                  generator, "--tagged", str(tmp_path / "tagged.json"),
                                  "--device", "cpu", "--out", str(tmp_path / "smus.txt"),
                                  "--json-out", str(tmp_path / "smus.json"))
    assert code == 0, err
    assert "POS tags: recorded" in printed
    made = json.loads((tmp_path / "smus.json").read_text())
    inputs = [tag_subgraph(t, SAID_TAGGED) for t in made[0]["tree"]] + \
        [tag_subgraph(t, None) for t in made[1]["tree"]]
    assert [s for record in made for s in record["smus"]] == generated(generator, inputs)
    assert "~VBD" in inputs[0] and len(made[0]["smus"]) == len(made[0]["tree"])
    assert len((tmp_path / "smus.txt").read_text().splitlines()) == 2
    code, _, err = sumbench(capsys, "units", "smus", "--amr", str(amr), "--out",
                            str(tmp_path / "no.txt"))
    assert code == 2 and "needs --amr-generator" in err, err


WANT = "# ::snt The boy wants to sleep .\n(w / want-01\n   :ARG0 (b / boy)\n" \
    "   :ARG1 (s / sleep-01\n      :ARG0 b))"
WORDS = [("The", "DT", "the"), ("boy", "NN", "boy"), ("wants", "VBZ", "want"), ("to", "TO", "to"),
         ("sleep", "VB", "sleep"), (".", ".", ".")]


def spacy_folder(path: Path, tags: bool = True) -> str:
    """A real spaCy pipeline on disk that sets Penn tags and lemmas by rule (no download)."""
    spacy = pytest.importorskip("spacy", reason="spaCy is not installed")
    nlp = spacy.blank("en")
    ruler = nlp.add_pipe("attribute_ruler")
    for word, tag, lemma in WORDS:
        ruler.add([[{"ORTH": word}]], {"TAG": tag, "LEMMA": lemma} if tags else {"LEMMA": lemma})
    nlp.to_disk(path)
    return str(path)


def test_tags_from_a_spacy_tagger_through_amrlibs_aligner(tmp_path):
    pytest.importorskip("amrlib", reason="amrlib (the RBW aligner) is not installed")
    import spacy

    from tasks.units.amr_tags import TaggingError, graph_tagger

    tag = graph_tagger(spacy.load(spacy_folder(tmp_path / "nlp")), "rules")
    assert tag(WANT) == "(w / want-01~VBZ :ARG0 (b / boy~NN) :ARG1 (s / sleep-01~VB :ARG0 b))"
    with pytest.raises(TaggingError, match="no '# ::snt' line"):
        tag(WANT.split("\n", 1)[1])


def test_smus_tag_with_the_spacy_pipeline_by_default(tmp_path, capsys, generator):
    pytest.importorskip("amrlib", reason="amrlib (the RBW aligner) is not installed")
    from tasks.units.amr_units import sentence_subgraphs, tag_subgraph

    amr = write_graphs(tmp_path / "amr.json", [WANT])
    nlp = spacy_folder(tmp_path / "nlp")
    code, printed, err = sumbench(capsys, "units", "smus", "--amr", str(amr), "--amr-generator",
                                  generator, "--spacy-pipeline", nlp, "--device", "cpu",
                                  "--json-out", str(tmp_path / "smus.json"))
    assert code == 0, err
    assert f"POS tags: spaCy pipeline {nlp} through amrlib's RBW aligner" in printed
    tagged = "(w / want-01~VBZ :ARG0 (b / boy~NN) :ARG1 (s / sleep-01~VB :ARG0 b))"
    inputs = [tag_subgraph(t, tagged) for t in sentence_subgraphs(WANT)]
    assert inputs and all("~" in text for text in inputs)
    assert json.loads((tmp_path / "smus.json").read_text())[0]["smus"] == \
        generated(generator, inputs)


@pytest.mark.parametrize("case, message", [
    ("no tagger", "sets no POS tags (it has no tagger)"),
    ("no sentence", "sentence 1: the graph has no '# ::snt' line"),
    ("not installed", "is not installed: install it or name another (--spacy-pipeline)"),
    ("bad recorded", "expected 1 tagged graphs (one per sentence)"),
])
def test_bad_tag_sources_stop_with_one_line(tmp_path, capsys, generator, case, message):
    pytest.importorskip("amrlib", reason="amrlib (the RBW aligner) is not installed")
    graph = WANT.split("\n", 1)[1] if case == "no sentence" else WANT
    amr = write_graphs(tmp_path / "amr.json", [graph])
    nlp = spacy_folder(tmp_path / "nlp", tags=case != "no tagger")
    (tmp_path / "tagged.json").write_text(json.dumps([[SAID_TAGGED, SAID_TAGGED]]))
    extra = {"not installed": ["--spacy-pipeline", str(tmp_path / "none")],
             "bad recorded": ["--tagged", str(tmp_path / "tagged.json")]}
    arguments = extra.get(case, ["--spacy-pipeline", nlp])
    code, _, err = sumbench(capsys, "units", "smus", "--amr", str(amr), "--amr-generator",
                            generator, *arguments, "--device", "cpu",
                            "--out", str(tmp_path / "smus.txt"))
    assert code == 2 and message in err, err
    assert not (tmp_path / "smus.txt").exists()
    if case == "no sentence":
        assert f"{amr}" in err and "[0].summary_trees[0]" in err, err


def test_untagged_is_said(tmp_path, capsys, generator):
    from tasks.units.amr_units import sentence_subgraphs, tag_subgraph

    amr = write_graphs(tmp_path / "amr.json", [WANT])
    code, printed, err = sumbench(capsys, "units", "smus", "--amr", str(amr), "--amr-generator",
                                  generator, "--untagged", "--device", "cpu",
                                  "--json-out", str(tmp_path / "smus.json"))
    assert code == 0 and "POS tags: none (--untagged: not the paper's input)" in printed, err
    inputs = [tag_subgraph(t, None) for t in sentence_subgraphs(WANT)]
    assert json.loads((tmp_path / "smus.json").read_text())[0]["smus"] == \
        generated(generator, inputs)


def test_the_sentences_parsed_are_the_released_graphs_sentences(capsys, tmp_path):
    from tasks.units.amr_units import sg2_sentences

    released = RELEASED / "realsumm-smus-sg2.json"
    if not released.is_file():
        pytest.skip("../shared/data/scu_units is absent")
    for record in json.loads(released.read_text()):
        snts = [graph.split("\n", 1)[0][len("# ::snt "):] for graph in record["summary_trees"]]
        assert sg2_sentences(record["summary"]) == snts, record["instance_id"]
    assert sg2_sentences("One. Two.", lambda text: text.split(". ")) == ["One", "Two."]
    references = tmp_path / "references.txt"
    references.write_text("<t> A b . </t>\n")
    code, _, err = sumbench(capsys, "units", "smus", "--amr-parser", str(tmp_path),
                            "--references", str(references), "--trees-out",
                            str(tmp_path / "t.json"))
    try:
        import amrlib  # noqa: F401
    except ImportError:
        assert code == 2 and "--amr-parser needs amrlib" in err, err
        return
    assert code == 2 and "not an amrlib parse model folder (no amrlib_meta.json)" in err, err
    (tmp_path / "amrlib_meta.json").write_text(json.dumps({
        "model_type": "stog", "inference_module": "os", "inference_class": "system"}))
    code, _, err = sumbench(capsys, "units", "smus", "--amr-parser", str(tmp_path),
                            "--references", str(references), "--trees-out",
                            str(tmp_path / "t.json"))
    assert code == 2 and "amrlib_meta.json, field 'inference_module'" in err and \
        "expected amrlib's parse_xfm parser" in err, err
    assert not (tmp_path / "t.json").exists()
