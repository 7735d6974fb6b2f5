"""SMUs, the SCU-approximation study's AMR units (Nawrath et al., NAACL 2024), variant "sg2":
subgraphs of each sentence's AMR graph (SCE `generation/atomic_amr.py:140-212`, :956-976,
shared/docs/scu-units.md §2.3), quirks kept, on penman (pinned: 1.2.1 made the released
trees):

1. the graph decoded with penman's AMR model (inverted roles normalised) and configured as a
   tree; its branches walked depth-first in pre-order;
2. each node's first branch is its instance `('/', concept)`; every later branch joins a
   group keyed by that instance branch, not by the variable, so two nodes with one concept
   share a group, rooted at the first one's variable;
3. a group's candidates: its `ARG` edges (inverse roles included), then those plus each other
   edge in turn; edges whose role holds `purpose` dropped; a candidate is kept when it has two
   `ARG` edges, or an `ARG2` edge and another;
4. each kept candidate written by penman (its default indentation, subtrees in full); where a
   sentence gives none, one subgraph per root edge whose target is a node (the fallback);
5. in each subgraph, every variable used but not instantiated in it that has a concept in
   the sentence's graph instantiated at its first use, `(v / concept)`, with a named
   concept's name, `(v / concept :name (n / name :op1 "..."))` (amrlib's
   `maybe_fix_unlinked_in_subgraph`, in the authors' amrlib); lines right-stripped.
"""
from __future__ import annotations

import re
from collections.abc import Sequence

from tasks.plumbing.errors import SumbenchError


def _penman():
    try:
        import penman
        from penman.models import amr
    except ImportError:
        raise SumbenchError("SMUs need penman: pip install 'sumbench[units]'") from None
    return penman, amr


def decode_tree(graph: str):
    """A sentence's PENMAN graph as penman's AMR-model tree (inverted roles normalised)."""
    penman, amr = _penman()
    return penman.configure(penman.decode(graph, model=amr.model), model=amr.model)


def _owner(tree, path: Sequence[int]):
    """The node owning the branch at `path` of `tree`."""
    node = tree.node
    for index in path[:-1]:
        node = node[1][index][1]
    return node


def _groups(tree) -> list[tuple[str, tuple, list]]:
    """(root variable, instance branch, edges) of each concept group, in walk order."""
    first: dict[str, tuple] = {}
    groups: dict[tuple, tuple[str, list]] = {}
    for path, branch in tree.walk():
        variable = _owner(tree, path)[0]
        if variable not in first:
            first[variable] = branch
            continue
        key = first[variable]
        groups.setdefault(key, (variable, []))[1].append(branch)
    return [(variable, key, edges) for key, (variable, edges) in groups.items()]


def _kept(edges: list) -> bool:
    args = [edge for edge in edges if "ARG" in edge[0]]
    return bool(edges) and (len(args) > 1 or (any("ARG2" in edge[0] for edge in edges)
                                              and len(edges) > 1))


def _format(variable: str, instance: tuple, edges: list) -> str:
    penman, _ = _penman()
    return penman.format(penman.Tree((variable, [instance, *edges])))


def raw_subgraphs(graph: str) -> list[str]:
    """Steps 1-4 of the module: the subgraphs of one sentence graph, unfixed."""
    tree = decode_tree(graph)
    subgraphs = []
    for variable, instance, edges in _groups(tree):
        args = [edge for edge in edges if "ARG" in edge[0]]
        others = [edge for edge in edges if "ARG" not in edge[0]]
        for candidate in [args] + [args + [other] for other in others]:
            candidate = [edge for edge in candidate if "purpose" not in edge[0]]
            if _kept(candidate):
                subgraphs.append(_format(variable, instance, candidate))
    if subgraphs:
        return subgraphs
    root, branches = tree.node
    instance = branches[0]
    return [_format(root, instance, [edge]) for edge in branches[1:]
            if isinstance(edge[1], tuple)]


# ---- the unlinked-variable fix -----------------------------------------------------------------
def _graph_nodes(graph: str) -> dict[str, str]:
    """variable -> what instantiates it in a subgraph: `(v / concept)`, with a named node's
    name, `(v / concept :name (n / name :op1 "..."))`; the authors' fix wrote one more `)`
    after a name that is not the node's last edge in the sentence graph (every such case of
    the released REALSumm trees has it, none of the others)."""
    tree = decode_tree(graph)
    nodes: dict[str, str] = {}

    def visit(node) -> None:
        variable, branches = node
        concept = next((target for role, target in branches if role == "/"), None)
        name, last = None, False
        for position, (role, target) in enumerate(branches):
            if role == ":name" and isinstance(target, tuple) and name is None:
                name, last = _inline(target), position == len(branches) - 1
            if isinstance(target, tuple):
                visit(target)
        if concept is not None and variable not in nodes:
            nodes[variable] = f"({variable} / {concept}" + (
                f" :name {name})" + ("" if last else ")") if name else ")")
    visit(tree.node)
    return nodes


def _inline(node) -> str:
    """A node on one line: `(n / name :op1 "A" :op2 "B")`."""
    variable, branches = node
    parts = [f"({variable}"]
    for role, target in branches:
        parts.append(f"{role} {_inline(target) if isinstance(target, tuple) else target}"
                     if role != "/" else f"/ {target}")
    return " ".join(parts) + ")"


_USE = re.compile(r"(?<=\s)([A-Za-z][A-Za-z0-9]*)(?=\)|\s|$)")


def fix_unlinked(graph: str, subgraph: str) -> str:
    """Step 5 of the module (the unfixed subgraph on any failure, as the original)."""
    try:
        nodes = _graph_nodes(graph)
        instantiated = set(re.findall(r"\(([A-Za-z][A-Za-z0-9]*) /", subgraph))
        fixed = subgraph
        for variable in dict.fromkeys(m.group(1) for m in _USE.finditer(subgraph)):
            if variable in instantiated or variable not in nodes:
                continue
            fixed = _replace_first_use(fixed, variable, nodes[variable])
        return "\n".join(line.rstrip() for line in fixed.split("\n"))
    except Exception:  # noqa: BLE001 - the original returns the subgraph unfixed on any error
        return subgraph


def _replace_first_use(text: str, variable: str, replacement: str) -> str:
    for match in _USE.finditer(text):
        if match.group(1) == variable and text[match.start() - 1] == " " and \
                not text[:match.start()].rstrip().endswith("/"):
            return text[:match.start()] + replacement + text[match.end():]
    return text


def sentence_subgraphs(graph: str) -> list[str]:
    """The sg2 subgraphs of one sentence graph, as the released `tree` lists hold them."""
    return [fix_unlinked(graph, subgraph) for subgraph in raw_subgraphs(graph)]


def reference_subgraphs(graphs: Sequence[str]) -> list[str]:
    """A reference's subgraphs: its sentences' in order, duplicates kept."""
    return [subgraph for graph in graphs for subgraph in sentence_subgraphs(graph)]


# ---- the generator's input ---------------------------------------------------------------------
def oneline(graph: str) -> str:
    """A PENMAN graph on one line, metadata dropped (amrlib's `gstring_to_oneline`)."""
    lines = [line.strip() for line in graph.split("\n") if not line.startswith("#")]
    return re.sub(" +", " ", " ".join(lines)).strip()


def tag_subgraph(subgraph: str, tagged_sentence: str | None) -> str:
    """The one-line subgraph with the sentence's POS tags put in (`replace_graph_with_tags`):
    every token of the sentence's tagged one-line graph that holds `~`, parentheses removed,
    maps its text before `~` to itself, and each is put in by plain substring replacement,
    in the tagged graph's order (so one key can hit inside another token, as in the original).
    Without a tagged graph, the subgraph as is."""
    text = oneline(subgraph)
    if not tagged_sentence:
        return text
    tags: dict[str, str] = {}
    for token in tagged_sentence.split():
        if "~" in token:
            bare = token.replace("(", "").replace(")", "")
            tags[bare.split("~")[0]] = bare
    for key, value in tags.items():
        text = text.replace(key, value)
    return text


def sg2_sentences(summary: str, split=None) -> list[str]:
    """The sentences the paper's sg2 run parsed (ATA `atomic_amr.py` @ 5cbfc86, :406-419):
    no-break spaces removed, white space made single spaces; the `<t> ... </t>` contents as
    they are (their edge spaces kept), else `split`'s sentences (spaCy's, in the paper)."""
    text = re.sub(r"\s+", " ", summary.replace("\u00a0", ""))
    if "<t>" in text:
        return re.findall("<t>(.*?)</t>", text)
    if split is None:
        raise SumbenchError("a reference without <t> marks needs a sentence splitter")
    return list(split(text))
