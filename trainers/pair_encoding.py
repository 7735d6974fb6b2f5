"""Token ids of (first, second) text pairs, each distinct text encoded once.

Presence scoring pairs every summary with each of its units (REALSumm: 26,400 pairs, 2,365
distinct summaries), and a tokenizer call on the pairs encodes each summary again for every
unit. With a fast (Rust `tokenizers`) tokenizer, `PairEncoder` encodes each distinct text once
without special tokens or truncation and builds every pair with the library's own
`Tokenizer.post_process`, the step that ends a pair `encode`: truncation of the pair, then the
post-processor's template (special tokens, type ids); an untruncated pair of a template-style
post-processor is joined from that template instead (below). It runs on private copies of the
tokenizer set up as the tokenizer call sets itself up (`truncation=True, max_length=...`:
longest first, the tokenizer's truncation side, its `split_special_tokens`), so the caller's
tokenizer is never changed; a change the caller makes later (truncation side,
`split_special_tokens`, added tokens) makes new copies, checked again.

With `lazy=True` the encoder returns `AssembledPairs`: every pair's length at once (for
sorting and batch plans) and each pair built when it is read, so that batches running on
worker threads assemble their own pairs while other batches compute (3% of the presence
benchmark's time) and a chunk's ids are never all held at once.

The library's post-processors for encoder pairs (`TemplateProcessing`, `BertProcessing`,
`RobertaProcessing`, `ByteLevel`, a `Sequence` of them, or none) put the same special tokens
and type ids around any two texts. For them `pair_template` reads those fixed parts once from
the library's own `post_process` of two probe texts (and checks them on two more: a template
that repeats a text is refused), and a pair that needs no truncation is the two texts' ids
with those parts around them: a few list joins instead of a new `Encoding` (on the presence
benchmark 8 ms of CPU instead of 13). Truncated pairs, and every pair of another
post-processor, go through `post_process`. `template` says "on" or why not.

The ids equal the tokenizer call's by construction. The first call checks that anyway on a
sample (`CHECK_PAIRS` pairs and every pair that was truncated) against the tokenizer's own
output; a difference turns the shortcut off for good, with a warning, and the tokenizer call
is used. `state` says "unchecked", "on" or "off: <why>". Slow tokenizers always use the call.
(Texts must not be truncated before the pair is: longest-first gives an odd leftover token to
the longer text, and two texts cut to `max_length` first would look equally long.)
On REALSumm's 26,400 pairs (one tokenizer thread): 5.0 s with the tokenizer call, 0.9 s
assembled.
"""
from __future__ import annotations

import json
import sys
from collections import abc
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

#: pairs of the first call compared with the tokenizer call (plus every truncated pair)
CHECK_PAIRS = 256


def feature_names(tokenizer: Any) -> tuple[str, ...]:
    """The id lists a tokenizer call returns by default: input_ids, and token_type_ids when
    the tokenizer's model takes them."""
    names = getattr(tokenizer, "model_input_names", ()) or ()
    return ("input_ids", "token_type_ids") if "token_type_ids" in names else ("input_ids",)


def call_tokenizer(tokenizer: Any, firsts: Sequence[str], seconds: Sequence[str],
                   max_length: int) -> list[dict]:
    """The plain way: one tokenizer call on the pairs, truncated to `max_length`."""
    if not firsts:
        return []
    encoded = tokenizer(list(firsts), list(seconds), truncation=True, max_length=max_length)
    names = [name for name in feature_names(tokenizer) if name in encoded]
    return [{name: list(encoded[name][i]) for name in names} for i in range(len(firsts))]


def private_backends(tokenizer: Any, max_length: int) -> tuple[tuple | None, str | None]:
    """((texts, pairs), None): two copies of the Rust tokenizer, one that encodes whole texts
    (no truncation: truncating each text first would change which side longest-first cuts)
    and one that builds pairs with the call's truncation; or (None, why not)."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None or not getattr(tokenizer, "is_fast", False):
        return None, f"{type(tokenizer).__name__} is not a fast (Rust) tokenizer"
    from tokenizers import Tokenizer

    try:
        serialised = backend.to_str()
        texts, pairs = Tokenizer.from_str(serialised), Tokenizer.from_str(serialised)
    except Exception as error:  # a tokenizer the library cannot serialise
        return None, f"the tokenizer cannot be copied ({str(error).splitlines()[0]})"
    specials = pairs.num_special_tokens_to_add(True)
    if max_length < specials:  # the call then leaves pairs untruncated (a warning)
        return None, (f"max_length {max_length} is shorter than a pair's {specials} special "
                      f"tokens")
    for copy in (texts, pairs):
        copy.no_padding()
        copy.encode_special_tokens = bool(getattr(tokenizer, "split_special_tokens", False))
    texts.no_truncation()
    pairs.enable_truncation(max_length, strategy="longest_first",
                            direction=getattr(tokenizer, "truncation_side", "right"))
    return (texts, pairs), None


def settings_signature(tokenizer: Any) -> tuple:
    """What the copies depend on that a caller may change later: the truncation side,
    `split_special_tokens` and the vocabulary size (added tokens)."""
    return (getattr(tokenizer, "truncation_side", "right"),
            bool(getattr(tokenizer, "split_special_tokens", False)), len(tokenizer))


#: post-processors that put the same special tokens and type ids around any two texts
TEMPLATE_PROCESSORS = frozenset({"TemplateProcessing", "BertProcessing", "RobertaProcessing",
                                 "ByteLevel"})
#: the two texts whose processed pair shows a post-processor's fixed parts, and two more
#: (of other lengths) that the parts read from them must give as `post_process` does
PROBE_TEXTS = ("first probe text", "the second")
CHECK_TEXTS = ("another", "and a longer second text")


@dataclass(frozen=True)
class PairTemplate:
    """The fixed ids and type ids before, between and after a pair's two texts."""
    before: list
    between: list
    after: list
    types_before: list
    first_type: int
    types_between: list
    second_type: int
    types_after: list

    def features(self, first: list, second: list, with_types: bool) -> dict:
        """The features of an untruncated pair from its two texts' ids."""
        ids = self.before + first + self.between + second + self.after
        if not with_types:
            return {"input_ids": ids}
        return {"input_ids": ids, "token_type_ids": self.types_before + [self.first_type] *
                len(first) + self.types_between + [self.second_type] * len(second) +
                self.types_after}


def _processor_types(processor: dict | None) -> list[str]:
    if not processor:
        return []
    if processor.get("type") == "Sequence":
        return [kind for part in processor.get("processors") or ()
                for kind in _processor_types(part)]
    return [str(processor.get("type"))]


def pair_template(text_backend: Any) -> tuple[PairTemplate | None, str]:
    """(the template, "on") for post-processors in TEMPLATE_PROCESSORS, read from the
    library's `post_process` of PROBE_TEXTS on `text_backend` (the copy that does not
    truncate) and checked on CHECK_TEXTS; else (None, "off: <why>")."""
    kinds = _processor_types(json.loads(text_backend.to_str()).get("post_processor"))
    other = sorted(set(kinds) - TEMPLATE_PROCESSORS)
    if other:
        return None, f"off: the {', '.join(other)} post-processor"
    try:  # a vocabulary without an unknown token may not encode the probes
        first, second, *check = text_backend.encode_batch([*PROBE_TEXTS, *CHECK_TEXTS],
                                                          add_special_tokens=False)
    except Exception as error:
        return None, f"off: the probe texts cannot be encoded ({str(error).splitlines()[0]})"
    template = _template_from(text_backend.post_process(first, second), first.ids, second.ids)
    if isinstance(template, str):
        return None, template
    expected = text_backend.post_process(*check)
    if template.features(check[0].ids, check[1].ids, True) != \
            {"input_ids": expected.ids, "token_type_ids": expected.type_ids}:
        return None, "off: the template read from the probe pair does not fit a second pair"
    return template, "on"


def _template_from(pair: Any, a: list, b: list) -> PairTemplate | str:
    """The fixed parts of processed `pair` around the texts' ids `a` and `b`, or why not."""
    ids, types = pair.ids, pair.type_ids
    fixed = len(ids) - len(a) - len(b)
    places = [(start, start + len(a) + gap) for start in range(fixed + 1)
              for gap in range(fixed - start + 1)
              if ids[start:start + len(a)] == a
              and ids[start + len(a) + gap:start + len(a) + gap + len(b)] == b]
    if not a or not b or len(places) != 1:
        return "off: the probe pair does not show where the texts go"
    (one, two), end = places[0], places[0][1] + len(b)
    first_types, second_types = set(types[one:one + len(a)]), set(types[two:end])
    if len(first_types) != 1 or len(second_types) != 1:
        return "off: a text's type ids vary"
    return PairTemplate(ids[:one], ids[one + len(a):two], ids[end:], types[:one],
                        first_types.pop(), types[one + len(a):two], second_types.pop(),
                        types[end:])


class PairEncoder:
    """`encoder(firsts, seconds)` -> one feature dict per pair, as `call_tokenizer` gives."""

    def __init__(self, tokenizer: Any, max_length: int, enabled: bool = True):
        self.tokenizer, self.max_length, self.enabled = tokenizer, int(max_length), enabled
        self.names = feature_names(tokenizer)
        self._set_up()

    def _set_up(self) -> None:
        """(Re)build the private copies from the tokenizer as it is now; "unchecked" again."""
        self._backends, reason = private_backends(self.tokenizer, self.max_length) \
            if self.enabled else (None, "turned off")
        self._signature = settings_signature(self.tokenizer) if self._backends else None
        self.state = "unchecked" if self._backends is not None else f"off: {reason}"
        #: a template-style post-processor's fixed parts (`pair_template`): "on" or why not
        self._template, self.template = pair_template(self._backends[0]) \
            if self._backends is not None else (None, "off: no pair encoding")

    def __call__(self, firsts: Sequence[str], seconds: Sequence[str],
                 lazy: bool = False) -> Sequence[dict]:
        """One feature dict per pair: a list, or with `lazy` (where the shortcut is on) an
        `AssembledPairs` that builds each pair when it is read and knows every length now."""
        if len(firsts) != len(seconds):
            raise ValueError(f"{len(firsts)} first texts but {len(seconds)} second texts")
        if self._backends is not None and settings_signature(self.tokenizer) != self._signature:
            self._set_up()  # the caller changed the tokenizer since: copy and check it again
        if self._backends is None or not firsts:
            return call_tokenizer(self.tokenizer, firsts, seconds, self.max_length)
        features = self._assemble(firsts, seconds)
        if self.state == "unchecked":
            self._check(firsts, seconds, features)
            if self._backends is None:
                return call_tokenizer(self.tokenizer, firsts, seconds, self.max_length)
        return features if lazy else list(features)

    def _assemble(self, firsts: Sequence[str], seconds: Sequence[str]) -> AssembledPairs:
        text_backend, pair_backend = self._backends
        encode = getattr(text_backend, "encode_batch_fast", text_backend.encode_batch)
        texts = list(dict.fromkeys([*firsts, *seconds]))
        encoded = dict(zip(texts, encode(texts, add_special_tokens=False)))
        return AssembledPairs([(encoded[first], encoded[second])
                               for first, second in zip(firsts, seconds)],
                              pair_backend, self.max_length, "token_type_ids" in self.names,
                              self._template)

    def _check(self, firsts: Sequence[str], seconds: Sequence[str],
               features: AssembledPairs) -> None:
        sample = sorted(set(range(min(CHECK_PAIRS, len(features)))) | {
            i for i, length in enumerate(features.lengths) if length >= self.max_length})
        expected = call_tokenizer(self.tokenizer, [firsts[i] for i in sample],
                                  [seconds[i] for i in sample], self.max_length)
        differ = [i for i, want in zip(sample, expected)
                  if features[i] != want or features.lengths[i] != len(want["input_ids"])]
        if not differ:
            self.state = "on"
            return
        self.state = (f"off: pair {differ[0]} differs from the tokenizer call "
                      f"({len(differ)} of {len(sample)} checked pairs)")
        self._backends, self._template, self.template = None, None, "off: no pair encoding"
        print(f"warning: pair encoding: {self.state}; using the tokenizer call",
              file=sys.stderr)


class AssembledPairs(abc.Sequence):
    """The pairs' feature dicts, each built when it is read, from the template where the pair
    needs no truncation, else by the library's `post_process` (so on the thread that reads
    it: batches assemble their pairs on their worker threads while other batches run), with
    every pair's length known at once: the two texts' tokens plus the special tokens, at
    most `max_length` (longest-first truncation cuts a longer pair to exactly that)."""

    def __init__(self, encodings: list[tuple[Any, Any]], pair_backend: Any, max_length: int,
                 with_types: bool, template: PairTemplate | None = None):
        self._encodings, self._backend, self._with_types = encodings, pair_backend, with_types
        self._template, self._max_length = template, max_length
        self._specials = specials = pair_backend.num_special_tokens_to_add(True)
        #: each pair's token count, as its features will have it
        self.lengths = [min(len(first) + len(second) + specials, max_length)
                        for first, second in encodings]

    def __len__(self) -> int:
        return len(self._encodings)

    def __getitem__(self, index: int) -> dict:
        if not isinstance(index, int):
            raise TypeError(f"pairs are read one at a time, by integer index, not {index!r}")
        first, second = self._encodings[index]
        if self._template is not None and \
                len(first) + len(second) + self._specials <= self._max_length:
            return self._template.features(first.ids, second.ids, self._with_types)
        pair = self._backend.post_process(first, second)
        return {"input_ids": pair.ids, "token_type_ids": pair.type_ids} if self._with_types \
            else {"input_ids": pair.ids}


def feature_lengths(features: Sequence[dict]) -> list[int]:
    """Every feature's token count (known up front for `AssembledPairs`)."""
    lengths = getattr(features, "lengths", None)
    return list(lengths) if lengths is not None else \
        [len(feature["input_ids"]) for feature in features]

