"""A seeded generator of a small synthetic corpus in the USB raw-annotation schema.

Made up by the project at run time (no data is shipped): every article has a title, a few
headed sections of one-fact sentences, and an edited summary whose sentences cite their
evidence lines. Each article holds at least one summary sentence of each kind, so every USB
task has records in every split:

* unchanged    (before == after; evidence in one section, so TOPIC has it),
* deleted      (after == ""),
* corrected    (a wrong place replaced: FAC and FIX records, skipped by UNSUP),
* trimmed      (an unsupported phrase deleted, words removed only: UNSUP spans).

The corpus carries a signal a small model can learn for every task (the demo shows it): the
source sentences that the summary uses are marked ("Notably, ..."), a summary sentence is its
evidence sentence copied without the mark (two facts joined by "and"), every fact of an article
has its own place and (up to the domain's eight) its own verb, so a claim shares them with its
evidence only, corrections change the place that the evidence states, and unsupported phrases
come from a short fixed list.

Layout written (see shared/docs/usb-format.md section 1):
``OUT/annotations/<domain>/<doc>.json``, ``OUT/splits/<variant>/{train,validation,test}.txt``
for every domain and ``all``, and ``OUT/synthetic.json`` (the generator's spec and counts).
Test-only domains (like USB's landmarks and newspapers) get `test_only_docs` documents each, all
in the test split of their own variant and of ``all``; their train and validation files are
empty.
Only ``random.Random(seed)`` is used, so one seed always gives byte-identical files.
"""
from __future__ import annotations

import dataclasses
import json
import random
from dataclasses import dataclass
from pathlib import Path

from tasks.plumbing.atomic import atomic_directory
from tasks.plumbing.errors import SumbenchError, check_choices
from tasks.plumbing.io import read_json

GENERATOR_VERSION = "3"
SPEC_FILE = "synthetic.json"
DEFAULT_DOMAINS = ("biographies", "companies", "disasters")
#: the split of each document by its position in the domain-interleaved order (60/20/20)
SPLIT_CYCLE = ("train", "test", "train", "validation", "train")
SPLIT_NAMES = ("train", "validation", "test")

PLACES = ("Lisbon", "Tromso", "Valparaiso", "Kyoto", "Aberdeen", "Tucuman", "Gdansk",
          "Mombasa", "Halifax", "Adelaide", "Bergamo", "Leipzig", "Cusco", "Dakar")
EXTRAS = ("after a long dispute with the board", "despite strong local opposition",
          "with help from a wealthy patron", "during a severe winter",
          "following a public vote", "under heavy political pressure")

DOMAINS: dict[str, dict] = {
    "biographies": {
        "first": ("Marta", "Ivo", "Leena", "Tomas", "Amara", "Rafael", "Noor", "Esther"),
        "last": ("Okafor", "Lindqvist", "Moreau", "Tanaka", "Petrov", "Alvarez", "Brandt"),
        "sections": ("Early life", "Education.", "Career", "Personal life", "Legacy."),
        "facts": (("studied", "painting"), ("joined", "the city orchestra"),
                  ("published", "a book of poems"), ("founded", "a small school"),
                  ("married", "a local doctor"), ("won", "a national award"),
                  ("taught", "chemistry"), ("directed", "a theatre company")),
    },
    "companies": {
        "first": ("Northwind", "Bluefin", "Cedar", "Ironbark", "Solano", "Kestrel"),
        "last": ("Foods", "Motors", "Textiles", "Shipping", "Pharma", "Brewing"),
        "sections": ("History", "Products.", "Operations", "Ownership", "Controversies"),
        "facts": (("opened", "a factory"), ("acquired", "a rival firm"),
                  ("launched", "a new product line"), ("closed", "an old warehouse"),
                  ("moved", "its headquarters"), ("sold", "a minority stake"),
                  ("built", "a research centre"), ("hired", "a new chief executive")),
    },
    "disasters": {
        "first": ("The great", "The northern", "The coastal", "The sudden", "The winter"),
        "last": ("flood", "earthquake", "wildfire", "landslide", "storm", "drought"),
        "sections": ("Background", "Impact.", "Response", "Aftermath", "Investigation"),
        "facts": (("destroyed", "hundreds of homes"), ("closed", "the main harbour"),
                  ("damaged", "two bridges"), ("cut", "power to the region"),
                  ("forced", "a mass evacuation"), ("flooded", "the old town"),
                  ("prompted", "new building rules"), ("reached", "the capital")),
    },
    "schools": {
        "first": ("St. Brigid's", "Hillcrest", "Riverside", "Oakmont", "Kingsway", "Elmfield"),
        "last": ("Academy", "High School", "College", "Grammar School", "Institute"),
        "sections": ("History", "Campus.", "Academics", "Athletics", "Notable alumni"),
        "facts": (("opened", "a science wing"), ("admitted", "its first girls"),
                  ("merged", "with a nearby school"), ("built", "a new library"),
                  ("won", "a regional debate prize"), ("started", "a boarding house"),
                  ("renamed", "its sports ground"), ("hosted", "a national chess final")),
    },
    "landmarks": {
        "first": ("The old", "The royal", "The twin", "The harbour", "The stone"),
        "last": ("lighthouse", "cathedral", "bridge", "fortress", "clock tower", "palace"),
        "sections": ("History", "Architecture.", "Restoration", "Tourism", "In culture"),
        "facts": (("gained", "a new spire"), ("survived", "a great fire"),
                  ("reopened", "to visitors"), ("lost", "its original roof"),
                  ("received", "a heritage listing"), ("housed", "a small museum"),
                  ("appeared", "on a postage stamp"), ("closed", "for repairs")),
    },
    "newspapers": {
        "first": ("The Morning", "The Evening", "The Daily", "The Weekly", "The Northern"),
        "last": ("Herald", "Courier", "Gazette", "Chronicle", "Observer", "Ledger"),
        "sections": ("History", "Ownership.", "Editorial stance", "Circulation", "Awards"),
        "facts": (("printed", "its first colour edition"), ("hired", "a famous editor"),
                  ("launched", "a Sunday supplement"), ("moved", "to a tabloid format"),
                  ("won", "a press freedom award"), ("opened", "a foreign bureau"),
                  ("lost", "a major libel case"), ("cut", "its cover price")),
    },
}


@dataclass(frozen=True)
class SyntheticSpec:
    """What determines the corpus: the seed, the number of documents, the domains with all
    three splits, and the test-only domains with `test_only_docs` documents each."""
    seed: int = 0
    docs: int = 30
    domains: tuple[str, ...] = DEFAULT_DOMAINS
    test_only_domains: tuple[str, ...] = ()
    test_only_docs: int = 2

    def __post_init__(self) -> None:
        object.__setattr__(self, "domains", tuple(self.domains))
        object.__setattr__(self, "test_only_domains", tuple(self.test_only_domains))
        if self.docs < len(SPLIT_NAMES) + 1:
            raise SumbenchError(f"the synthetic corpus needs at least {len(SPLIT_NAMES) + 1} "
                                f"documents (train, validation and test), got {self.docs}")
        everything = check_choices(self.domains + self.test_only_domains, DOMAINS,
                                   "synthetic domain")
        if not self.domains:
            raise SumbenchError(f"the synthetic corpus needs a domain with all three splits "
                                f"(known: {', '.join(DOMAINS)})")
        if len(set(everything)) != len(everything):
            raise SumbenchError(f"a synthetic domain is listed twice: {list(everything)}")
        if self.test_only_domains and self.test_only_docs < 1:
            raise SumbenchError(f"test-only domains need test_only_docs >= 1, "
                                f"got {self.test_only_docs}")

    def to_dict(self) -> dict:
        return {**dataclasses.asdict(self), "domains": list(self.domains),
                "test_only_domains": list(self.test_only_domains),
                "generator_version": GENERATOR_VERSION}


@dataclass(frozen=True)
class Fact:
    """One source sentence: `{subject} {verb} {thing} in {place}.`"""
    verb: str
    thing: str
    place: str

    def sentence(self, subject: str) -> str:
        return f"{subject} {self.clause()}."

    def clause(self) -> str:
        """The sentence without its subject and period (joined after "and")."""
        return f"{self.verb} {self.thing} in {self.place}"


#: the mark of a source sentence that the summary uses (the learnable EXT/EVEXT signal)
MARK = "Notably, "


# ---- one article ------------------------------------------------------------------------

def _subject(rng: random.Random, domain: str) -> str:
    words = DOMAINS[domain]
    return f"{rng.choice(words['first'])} {rng.choice(words['last'])}"


def _fact_kinds(rng: random.Random, domain: str):
    """(verb, thing) pairs of the domain in a random order, each used once before any repeats
    (a claim's verb mostly names its evidence line)."""
    while True:
        yield from rng.sample(DOMAINS[domain]["facts"], len(DOMAINS[domain]["facts"]))


def _line(txt: str, header: bool, index: int, name: str) -> dict:
    return {"txt": txt, "is_header": header, "section_index": index, "section_name": name}


def build_source(rng: random.Random, domain: str, subject: str) -> tuple[list[dict], dict]:
    """Source lines and {line index: Fact} of the fact lines, grouped by section index; every
    fact of an article happens in another place and, up to the domain's eight kinds, is of
    another kind (a claim's place and verb find its evidence)."""
    lines = [_line(subject, True, 0, subject)]
    facts: dict[int, Fact] = {}
    places = iter(rng.sample(PLACES, len(PLACES)))
    kinds = _fact_kinds(rng, domain)
    if rng.random() < 0.5:  # a lead sentence under the title
        facts[len(lines)] = Fact(*next(kinds), next(places))
        lines.append(_line(facts[len(lines)].sentence(subject), False, 0, subject))
    names = rng.sample(DOMAINS[domain]["sections"], rng.randint(2, 3))
    for index, name in enumerate(names, start=1):
        lines.append(_line(name, True, index, name))
        for _ in range(rng.randint(2, 3)):
            facts[len(lines)] = Fact(*next(kinds), next(places))
            lines.append(_line(facts[len(lines)].sentence(subject), False, index, name))
    return lines, facts


def summary_sentence(subject: str, facts: list[Fact]) -> str:
    """One or two facts as the source states them (`{subject} ... and ...`), without the mark."""
    return " and ".join([f"{subject} {facts[0].clause()}", *(f.clause() for f in facts[1:])]) + "."


def _wrong(rng: random.Random, fact: Fact) -> Fact:
    """The fact with its place changed (an unsupported claim)."""
    return dataclasses.replace(fact, place=rng.choice([p for p in PLACES if p != fact.place]))


def _with_extra(rng: random.Random, sentence: str) -> str:
    """The sentence with an unsupported phrase before its final period."""
    return f"{sentence[:-1]} {rng.choice(EXTRAS)}."


def _evidence(rng: random.Random, source: list[dict], facts: dict[int, Fact],
              cross_section: bool) -> list[int]:
    """One or two fact lines of one section (of two sections when `cross_section`)."""
    by_section: dict[int, list[int]] = {}
    for index in facts:
        by_section.setdefault(source[index]["section_index"], []).append(index)
    sections = sorted(by_section)
    if cross_section and len(sections) > 1:
        first, second = rng.sample(sections, 2)
        return [rng.choice(by_section[first]), rng.choice(by_section[second])]
    lines = by_section[rng.choice(sections)]
    return rng.sample(lines, min(len(lines), 1 if rng.random() < 0.8 else 2))


def _edit(rng: random.Random, kind: str, subject: str, evidence: list[Fact]) -> tuple[str, str]:
    """(before, after) of one summary sentence of the given edit kind."""
    correct = summary_sentence(subject, evidence)
    if kind == "unchanged":
        return correct, correct
    if kind == "deleted":
        return correct, ""
    if kind == "trimmed":
        return _with_extra(rng, correct), correct
    wrong = [_wrong(rng, evidence[0]), *evidence[1:]]
    return summary_sentence(subject, wrong), correct  # "corrected"


EDIT_KINDS = ("unchanged", "deleted", "corrected", "trimmed")


def build_summary(rng: random.Random, subject: str, source: list[dict],
                  facts: dict[int, Fact]) -> tuple[list[str], list[str], list[list[int]]]:
    """(before, after, refs): one sentence of each edit kind plus 0-2 random ones."""
    kinds = list(EDIT_KINDS) + [rng.choice(EDIT_KINDS) for _ in range(rng.randint(0, 2))]
    rng.shuffle(kinds)
    before, after, refs = [], [], []
    for kind in kinds:
        cross = kind != "unchanged" and rng.random() < 0.2
        group = _evidence(rng, source, facts, cross)
        first, second = _edit(rng, kind, subject, [facts[i] for i in group])
        before.append(first)
        after.append(second)
        refs.append([] if kind == "deleted" and rng.random() < 0.5 else group)
    return before, after, refs


def generate_document(rng: random.Random, domain: str) -> dict:
    """One annotation document in the raw USB schema."""
    subject = _subject(rng, domain)
    source, facts = build_source(rng, domain, subject)
    before, after, refs = build_summary(rng, subject, source, facts)
    for index in sorted({line for kept, group in zip(after, refs) if kept for line in group}):
        source[index] = {**source[index], "txt": MARK + source[index]["txt"]}
    return {"annotations": {"source": source,
                            "orig_summary": [{"txt": text} for text in before],
                            "annotations": {"summary_sents": after, "refs": refs}}}


# ---- the corpus -------------------------------------------------------------------------

def document_ids(spec: SyntheticSpec) -> list[str]:
    """Relative annotation paths, interleaved over domains (`<domain>/syn000.json`, ...)."""
    return [f"{spec.domains[k % len(spec.domains)]}/syn{k // len(spec.domains):03d}.json"
            for k in range(spec.docs)]


def test_only_ids(spec: SyntheticSpec) -> list[str]:
    """Relative annotation paths of the test-only domains' documents, domain by domain."""
    return [f"{domain}/syn{k:03d}.json" for domain in spec.test_only_domains
            for k in range(spec.test_only_docs)]


def assign_splits(ids: list[str], test_only: list[str] = ()) -> dict[str, list[str]]:
    """split -> ids, by position in the interleaved order (SPLIT_CYCLE: 60/20/20); the
    test-only documents are appended to test."""
    splits: dict[str, list[str]] = {name: [] for name in SPLIT_NAMES}
    for position, doc_id in enumerate(ids):
        splits[SPLIT_CYCLE[position % len(SPLIT_CYCLE)]].append(doc_id)
    splits["test"].extend(test_only)
    return splits


def generate_annotations(spec: SyntheticSpec) -> dict[str, dict]:
    """{relative path: annotation} for the whole corpus, from one seeded generator."""
    rng = random.Random(spec.seed)
    return {doc_id: generate_document(rng, doc_id.split("/")[0])
            for doc_id in document_ids(spec) + test_only_ids(spec)}


def variant_splits(spec: SyntheticSpec) -> dict[str, dict[str, list[str]]]:
    """variant -> split -> ids, for `all` and every domain (test-only ones included)."""
    splits = assign_splits(document_ids(spec), test_only_ids(spec))
    variants = {"all": splits}
    for domain in spec.domains + spec.test_only_domains:
        variants[domain] = {name: [doc for doc in ids if doc.startswith(domain + "/")]
                            for name, ids in splits.items()}
    return variants


def _write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def generate_corpus(out_dir: str | Path, spec: SyntheticSpec | None = None) -> dict:
    """Write the corpus to `out_dir` (replaced as a whole); returns the contents of
    `synthetic.json`: the spec and the number of documents per variant and split."""
    spec = spec or SyntheticSpec()
    annotations = generate_annotations(spec)
    variants = variant_splits(spec)
    info = {"format": "sumbench-synthetic-usb/1", "spec": spec.to_dict(),
            "documents": {variant: {name: len(ids) for name, ids in splits.items()}
                          for variant, splits in variants.items()}}
    with atomic_directory(out_dir) as staging:
        for doc_id, annotation in annotations.items():
            text = json.dumps(annotation, indent=1, ensure_ascii=False) + "\n"
            _write_text(staging / "annotations" / doc_id, text)
        for variant, splits in variants.items():
            for name, ids in splits.items():
                _write_text(staging / "splits" / variant / f"{name}.txt",
                            "".join(doc_id + "\n" for doc_id in ids))
        _write_text(staging / SPEC_FILE, json.dumps(info, indent=1, sort_keys=True) + "\n")
    return info


def read_corpus_info(raw_dir: str | Path) -> dict | None:
    """The `synthetic.json` of a generated corpus, or None when there is none."""
    path = Path(raw_dir) / SPEC_FILE
    if not path.is_file():
        return None
    return read_json(path)
