"""SMUs (Nawrath et al., NAACL 2024): AMR graphs of each reference sentence, parsed by amrlib
(`parse_references`) or read as recorded (`read_graphs`), cut into sg2 subgraphs
(tasks.units.amr_units), tagged by their sentence (`sentence_tags`: recorded, none, or spaCy
through amrlib's aligner, tasks.units.amr_tags) and turned into text by an AMR-to-text
generator (`add_smu_text`, leaderboard.evaluators.units.amr_text)."""
from __future__ import annotations

import logging
from pathlib import Path

from leaderboard.evaluators.units.amr_text import load_amr_generator
from tasks.plumbing.errors import DataError, SumbenchError
from tasks.plumbing.io import read_json, read_lines
from tasks.plumbing.spacy_loader import DEFAULT_PIPELINE, spacy_pipeline
from tasks.units.amr_tags import TaggingError, graph_tagger
from tasks.units.amr_units import sentence_subgraphs, sg2_sentences, tag_subgraph
from trainers.inference.generation import resolve_device


def read_graphs(path: str) -> list[dict]:
    records = read_json(path, what="AMR graphs")
    if not isinstance(records, list) or not records:
        raise DataError("expected a list of {instance_id, summary, summary_trees}", path=path)
    for number, record in enumerate(records):
        trees = record.get("summary_trees") if isinstance(record, dict) else None
        if not isinstance(trees, list) or not all(isinstance(t, str) for t in trees):
            raise DataError("expected a list of PENMAN graphs", path=path,
                            field=f"[{number}].summary_trees")
        if not trees:
            raise DataError("a reference with no sentences", path=path,
                            field=f"[{number}].summary_trees")
    return records


def parse_references(references: str, parser_folder: str, pipeline: str | None,
                     device: str | None) -> list[dict]:
    """The references (a file, one per line) parsed by amrlib's parse_xfm model in
    `parser_folder`, sentences cut as the paper's sg2 run cut them."""
    try:
        import amrlib
    except ImportError:
        raise SumbenchError("--amr-parser needs amrlib (pip install amrlib) and its "
                            "parse_xfm_bart_large model folder; or give recorded graphs "
                            "(--amr FILE)") from None
    check_parser_folder(parser_folder)
    parser = amrlib.load_stog_model(model_dir=parser_folder, num_beams=4, batch_size=12,
                                    device=str(resolve_device(device or "auto")))
    parser.max_graph_len = 700  # the authors' amrlib forced it
    split = spacy_splitter(pipeline)
    records = []
    for number, reference in enumerate(read_lines(references, what="references"),
                                       start=1):
        sentences = sg2_sentences(reference, split)
        if not sentences:
            raise DataError("a reference with no sentences", path=references,
                            line=number)
        graphs = parser.parse_sents(sentences, add_metadata=True)
        failed = next((i for i, graph in enumerate(graphs, start=1) if graph is None), None)
        if failed is not None:
            raise DataError(f"amrlib could not parse sentence {failed}", path=references,
                            line=number)
        records.append({"instance_id": str(number - 1), "summary": reference,
                        "summary_trees": graphs})
    return records


def check_parser_folder(folder: str) -> None:
    """An amrlib parse_xfm model folder: its amrlib_meta.json names amrlib's parse_xfm
    inference (amrlib imports the module a folder names, so no other is let through)."""
    meta_path = Path(folder) / "amrlib_meta.json"
    if not meta_path.is_file():
        raise DataError("not an amrlib parse model folder (no amrlib_meta.json); give "
                        "parse_xfm_bart_large's folder", path=folder)
    meta = read_json(str(meta_path), what="amrlib model metadata")
    expected = {"model_type": "stog", "inference_module": ".parse_xfm.inference",
                "inference_class": "Inference"}
    wrong = [key for key, value in expected.items()
             if not isinstance(meta, dict) or meta.get(key) != value]
    if wrong:
        named = ", ".join(f"{key} {value!r}" for key, value in expected.items())
        raise DataError(f"expected amrlib's parse_xfm parser ({named})", path=str(meta_path),
                        field=wrong[0])


def subgraph_records(records: list[dict], where: str | None) -> list[dict]:
    """Each reference's record with its sentences' sg2 subgraphs (`tree`); a graph that does
    not parse is an error naming `where` and the reference."""
    logging.getLogger("penman").setLevel(logging.ERROR)  # re-entrancy notes, not errors
    out = []
    for number, record in enumerate(records):
        trees = []
        for sentence, graph in enumerate(record["summary_trees"], start=1):
            try:
                trees.extend(sentence_subgraphs(graph))
            except Exception as error:  # noqa: BLE001 - penman's parse errors vary
                raise DataError(f"the graph of sentence {sentence} does not parse: "
                                f"{str(error).splitlines()[0][:200]}", path=where,
                                field=f"[{number}].summary_trees") from None
        out.append({"instance_id": record.get("instance_id", str(number)),
                    "summary": record.get("summary"),
                    "summary_trees": record["summary_trees"], "tree": trees})
    return out


def add_smu_text(out: list[dict], records: list[dict], generator: str, device: str | None,
                 tags) -> None:
    """Each reference's SMUs (`out[i]["smus"]`): its subgraphs, tagged by their sentence
    (`tags`, from `sentence_tags`), through the AMR-to-text `generator`."""
    inputs, owners = [], []
    for number, record in enumerate(records):
        for sentence, graph in enumerate(record["summary_trees"]):
            tagged = tags(number, sentence)
            for subgraph in sentence_subgraphs(graph):
                inputs.append(tag_subgraph(subgraph, tagged))
                owners.append(number)
    texts = load_amr_generator(generator, device or "auto").generate(inputs)
    for record in out:
        record["smus"] = []
    for number, text in zip(owners, texts):
        out[number]["smus"].append(text)


def sentence_tags(records: list[dict], tagged: str | None, untagged: bool,
                  pipeline: str | None, where: str):
    """(a function from (reference, sentence) to the sentence's tagged one-line graph or
    None, a description of the tags): recorded (--tagged), none (--untagged), or spaCy's
    through amrlib's aligner, as the authors' parser made them."""
    if untagged:
        return (lambda number, sentence: None), "none (--untagged: not the paper's input)"
    if tagged:
        recorded = recorded_tags(records, tagged)
        return (lambda number, sentence: recorded[number][sentence]), f"recorded ({tagged})"
    name = pipeline or DEFAULT_PIPELINE
    tag = graph_tagger(spacy_pipeline(name), name)

    def from_spacy(number: int, sentence: int) -> str:
        try:
            return tag(records[number]["summary_trees"][sentence])
        except TaggingError as error:
            raise DataError(f"sentence {sentence + 1}: {error}", path=where,
                            field=f"[{number}].summary_trees[{sentence}]") from None
    return from_spacy, f"spaCy pipeline {name} through amrlib's RBW aligner"


def recorded_tags(records: list[dict], path: str) -> list[list]:
    tagged = read_json(path, what="tagged graphs")
    if not isinstance(tagged, list) or len(tagged) != len(records):
        raise DataError(f"expected a list of {len(records)} references' tagged graphs",
                        path=path)
    for number, (sentences, record) in enumerate(zip(tagged, records)):
        if not isinstance(sentences, list) or len(sentences) != len(record["summary_trees"]):
            raise DataError(f"expected {len(record['summary_trees'])} tagged graphs (one per "
                            f"sentence)", path=path, field=f"[{number}]")
        if not all(graph is None or isinstance(graph, str) for graph in sentences):
            raise DataError("expected strings (or null: untagged)", path=path,
                            field=f"[{number}]")
    return tagged


def spacy_splitter(name: str | None):
    """Sentences of a spaCy pipeline by name or folder (loaded on first use)."""
    def split(text: str) -> list[str]:
        return [sentence.text for sentence in spacy_pipeline(name)(text).sents]
    return split
