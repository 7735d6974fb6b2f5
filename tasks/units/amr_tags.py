"""POS-tagged one-line graphs, the generator input of the SCU-approximation authors' sg2 run.

Their modified amrlib 0.7.1 parser returned, beside each sentence graph,
`ModelInputHelper(graph, force_annotate=True).get_tagged_oneline()` (`scu-units.md` §2.1):
the graph's `# ::snt` sentence annotated by spaCy (tokens, lemmas, Penn tags), the graph
aligned to those tokens by amrlib's RBW aligner, and each aligned concept suffixed with its
token's tag (`sleep-01~VBG`). PyPI's amrlib 0.8.1 keeps that helper: against 0.7.1 its tagging,
the RBW aligner and the spaCy annotation of a graph are the same code (only the annotation
switch is renamed, `reannotate=True` for `force_annotate=True`). `graph_tagger` runs it with
the spaCy pipeline given here, not amrlib's global default. `tag_subgraph` (amr_units) then
puts the tags into each subgraph.
"""
from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from tasks.plumbing.errors import SumbenchError


class TaggingError(ValueError):
    """A sentence graph that cannot be tagged (the caller names its file and field)."""


def graph_tagger(nlp: Any, pipeline_name: str) -> Callable[[str], str]:
    """A function from a sentence graph (PENMAN, with its `# ::snt` line) to its tagged one-line
    graph, tagged by the spaCy pipeline `nlp`, which must set Penn tags (`token.tag_`)."""
    try:
        from amrlib.graph_processing import annotator
        from amrlib.models.generate_xfm.model_input_helper import ModelInputHelper
    except ImportError:
        raise SumbenchError("POS tags from spaCy need amrlib's RBW aligner: pip install "
                            "'sumbench[units]'; or give recorded tagged graphs (--tagged FILE)"
                            ) from None

    def tag(graph: str) -> str:
        if "# ::snt" not in graph:
            raise TaggingError("the graph has no '# ::snt' line, the sentence its tags come from")
        annotator.spacy_nlp = nlp  # amrlib's annotator reads this module global
        try:
            helper = ModelInputHelper(graph, reannotate=True)
        except Exception as error:  # noqa: BLE001 - penman's and the aligner's errors vary
            raise TaggingError(f"amrlib could not tag it: {type(error).__name__}: "
                               f"{str(error).splitlines()[0][:200] if str(error) else ''}"
                               ) from None
        if not any(json.loads(helper.metadata.get("pos_tags", "[]"))):
            raise SumbenchError(f"spaCy pipeline {pipeline_name!r} sets no POS tags (it has no "
                                f"tagger): name one that does (--spacy-pipeline), or give "
                                f"recorded tagged graphs (--tagged FILE)")
        return helper.get_tagged_oneline()
    return tag
