"""Content units of QAPyramid: QA-SRL pairs, their predicates, and QA -> statement rewriting.

QA-SRL questions follow a slot template `WH AUX SUBJ VERB OBJ PREP OBJ2 ?` with placeholder
arguments (someone, something, somewhere), e.g. "What did someone escape from?".

Predicate of a question (`question_verb`): the first word after the wh-word that is neither an
auxiliary/negation nor a placeholder ("Who was biting someone?" -> "biting").
Predicate grouping of a flat QA list (`group_by_predicate`): consecutive QAs whose question verbs
share a Porter stem (after mapping irregular forms to their base: gave/given -> give) belong to
one predicate, and a question asked twice starts a new one. The QAPyramid dataset lists a
predicate's QAs together; on the raw judgments file, whose grouping is exact, the heuristic
recovers 372 of 396 predicates exactly (the misses are mostly two adjacent predicates with the
same verb).

Statement rewriting (`qa_to_statement`, deterministic, rule-based):
- subject questions (the wh-word fills the subject: "Who escaped from something?",
  "What was given?"): answer + the rest of the question: "Juan Arango escaped from something."
- other questions ("WH AUX SUBJ ...?", SUBJ a placeholder or pronoun): the auxiliary moves after
  the subject and the answer goes at the end: "What did someone score?" + "a free kick" ->
  "someone did score a free kick."; "Why might someone face something?" + "for the incident" ->
  "someone might face something for the incident."; a fronted preposition ("From whom did
  someone attract something?") goes before the answer ("... attract something from the fans.").
The first letter is upper-cased and a final "." added. Placeholders are kept as they are.
"""
from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Sequence

from tasks.metrics.qa import PLACEHOLDERS, join_qa
from tasks.units.kinds import SINGULAR, UnitKind, spellings, unit_kind_or_none

#: unit kinds a presence instance can carry, as its `unit_kind` field spells them (singular)
UNIT_KINDS = spellings(UnitKind.QAS, UnitKind.STATEMENTS, UnitKind.SCUS, UnitKind.STUS,
                       spelling=SINGULAR)
QA_UNIT_KINDS = spellings(UnitKind.QAS, UnitKind.STATEMENTS, spelling=SINGULAR)

WH_WORDS = ("who", "what", "when", "where", "why", "how", "which", "whom", "whose")
AUXILIARIES = frozenset("""
am is are was were be been being do does did done has have had having will would shall should
can could may might must ought not n't 's 're 'd 'll 've wo ca
""".split())
#: words between the auxiliaries and the verb that are not the verb ("is best known", "was to open")
NON_VERBS = frozenset({"to", "best", "also", "still", "never", "just", "already", "ever", "even",
                       "only", "really", "well", "often", "always", "some", "way", "by", "means"})
#: irregular verb forms -> base form (so "gave"/"given" group with "give")
_IRREGULAR_FORMS = """
arise arose arisen; awake awoke awoken; bear bore born borne; beat beaten; become became;
begin began begun; bend bent; bet; bind bound; bite bit bitten; bleed bled; blow blew blown;
break broke broken; bring brought; build built; burn burnt; buy bought; catch caught;
choose chose chosen; come came; cost; cut; deal dealt; dig dug; do did done; draw drew drawn;
drink drank drunk; drive drove driven; eat ate eaten; fall fell fallen; feed fed; feel felt;
fight fought; find found; flee fled; fly flew flown; forbid forbade forbidden; forget forgot
forgotten; forgive forgave forgiven; freeze froze frozen; get got gotten; give gave given;
go went gone; grow grew grown; hang hung; have had; hear heard; hide hid hidden; hit; hold held;
hurt; keep kept; know knew known; lay laid; lead led; leave left; lend lent; let; lie lay lain;
lose lost; make made; mean meant; meet met; pay paid; put; quit; read; ride rode ridden;
ring rang rung; rise rose risen; run ran; say said; see saw seen; seek sought; sell sold;
send sent; set; shake shook shaken; shoot shot; show shown; shut; sing sang sung; sink sank
sunk; sit sat; sleep slept; speak spoke spoken; spend spent; split; spread; stand stood;
steal stole stolen; stick stuck; strike struck stricken; swear swore sworn; sweep swept;
swim swam swum; take took taken; teach taught; tear tore torn; tell told; think thought;
throw threw thrown; understand understood; wake woke woken; wear wore worn; win won;
withdraw withdrew withdrawn; write wrote written
"""
IRREGULAR_BASE = {form: group.split()[0] for group in _IRREGULAR_FORMS.split(";")
                  for form in group.split()}
SUBJECT_WORDS = PLACEHOLDERS | {"it", "he", "she", "they", "i", "we", "you", "one"}
_WORD = re.compile(r"[A-Za-z]+(?=n't\b)|n't\b|[A-Za-z']+|[^\sA-Za-z']+")


def question_words(question: str) -> list[str]:
    return [word for word in _WORD.findall(question) if word != "?"]


def _wh_span(words: Sequence[str]) -> tuple[int, int]:
    """[start, end) of the wh-phrase; words before `start` are a fronted preposition
    ("From whom", "By how much"); "how much/many/long/often/far" count as one wh-word."""
    lowered = [word.lower() for word in words]
    start = next((i for i, word in enumerate(lowered[:3]) if word in WH_WORDS), 0)
    if lowered[start:start + 1] == ["how"] and len(lowered) > start + 1 and \
            lowered[start + 1] in {"much", "many", "long", "often", "far"}:
        return start, start + 2
    return start, min(start + 1, len(words))


def _wh_length(words: Sequence[str]) -> int:
    return _wh_span(words)[1]


def question_verb(question: str) -> str:
    """The predicate word of a QA-SRL question ("" when none is found)."""
    words = question_words(question)
    for word in words[_wh_length(words):]:
        lowered = word.lower()
        if (lowered in AUXILIARIES or lowered in PLACEHOLDERS or lowered in NON_VERBS
                or not word[0].isalpha()):
            continue
        return word
    return ""


@functools.lru_cache(maxsize=8192)
def verb_stem(word: str) -> str:
    """Porter stem of the base form (groups "escaped"/"escape", "gave"/"given"/"give")."""
    from nltk.stem.porter import PorterStemmer

    lowered = word.lower()
    return PorterStemmer().stem(IRREGULAR_BASE.get(lowered, lowered))


def question_signature(question: str) -> str:
    """The question with its verb replaced by the verb's stem (the role it asks about)."""
    verb = question_verb(question)
    words = [verb_stem(w) if w == verb else w.lower() for w in question_words(question)]
    return " ".join(words)


def group_by_predicate(qas: Sequence[tuple[str, str]]) -> list[list[int]]:
    """Indices of `qas` grouped into predicates: consecutive runs with one verb stem; a
    question already asked in the current run (same signature) starts a new predicate."""
    groups: list[list[int]] = []
    previous, seen = None, set()
    for index, (question, _) in enumerate(qas):
        stem, signature = verb_stem(question_verb(question)), question_signature(question)
        if groups and stem == previous and signature not in seen:
            groups[-1].append(index)
            seen.add(signature)
        else:
            groups.append([index])
            seen = {signature}
        previous = stem
    return groups


def predicate_word(questions: Iterable[str], reference: str | None = None) -> str:
    """A display form of the predicate: a question verb that occurs in `reference` (its
    surface form there), else the first question's verb."""
    verbs = [verb for verb in (question_verb(q) for q in questions) if verb]
    if not verbs:
        return ""
    if reference:
        stems = {verb_stem(verb) for verb in verbs}
        for token in re.findall(r"[A-Za-z']+", reference):
            if verb_stem(token) in stems:
                return token
    return verbs[0]


def _is_subject_question(words: Sequence[str]) -> bool:
    """True when the wh-word is the subject (no "AUX SUBJ" right after it)."""
    start = _wh_length(words)
    rest = [word.lower() for word in words[start:]]
    if len(rest) >= 2 and rest[0] in AUXILIARIES:
        position = 2 if rest[1] in {"not", "n't"} and len(rest) > 2 else 1
        return rest[position] not in SUBJECT_WORDS
    return True


def _sentence(words: Sequence[str]) -> str:
    text = " ".join(word for word in words if word).strip()
    text = re.sub(r"\s+(n't|'s)\b", r"\1", text)
    return (text[:1].upper() + text[1:]).rstrip(" .") + "." if text else ""


def qa_to_statement(question: str, answer: str) -> str:
    """The QA pair rewritten as a declarative statement (rules in the module docstring)."""
    words = question_words(question)
    answer = answer.strip()
    if not words:
        return _sentence([answer])
    fronted_end, start = _wh_span(words)
    fronted = [word.lower() for word in words[:fronted_end]]
    if _is_subject_question(words):
        return _sentence([*fronted, answer, *words[start:]])
    aux, rest = words[start], list(words[start + 1:])
    negation = []
    if rest and rest[0].lower() in {"not", "n't"}:
        negation, rest = [rest[0]], rest[1:]
    subject, tail = rest[:1], rest[1:]
    return _sentence([*subject, aux, *negation, *tail, *fronted, answer])


def unit_text(kind: str, question: str, answer: str) -> str:
    """The unit string shown to a presence model for a QA pair of unit kind `kind` (any
    spelling of tasks.units.kinds: "qa" or "qas", "statement" or "statements")."""
    if unit_kind_or_none(kind) is UnitKind.QAS:
        return join_qa(question, answer)
    if unit_kind_or_none(kind) is UnitKind.STATEMENTS:
        return qa_to_statement(question, answer)
    raise ValueError(f"unit kind {kind!r} is not built from a QA pair (use one of "
                     f"{', '.join(QA_UNIT_KINDS)})")
