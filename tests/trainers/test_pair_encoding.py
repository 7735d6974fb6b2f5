"""Pairs assembled from texts encoded once equal the tokenizer call, for every kind of
post-processor; anything else falls back to the call, saying why."""
from __future__ import annotations

import pytest

pytest.importorskip("tokenizers")
transformers = pytest.importorskip("transformers")

from tokenizers import Tokenizer, models, pre_tokenizers, processors, trainers  # noqa: E402

import trainers.pair_encoding as pair_encoding  # noqa: E402
from trainers.pair_encoding import AssembledPairs, PairEncoder, call_tokenizer, feature_lengths  # noqa: E402

CORPUS = ["The cat sat on the mat.", "A dog ran across the park, barking.",
          "Émigrés drank naïve café au lait in 日本.", "the the the [SEP] </s> <s>"] * 10
LONG = " ".join(f"word{i} and more" for i in range(60))
FIRSTS = ["The cat sat on the mat.", "The cat sat on the mat.", "", "   ", "日本語 ☃ 🎉", LONG,
          "short", LONG, "text with [SEP] and </s> inside", "The cat sat on the mat."]
SECONDS = ["A cat sat.", "The mat.", "empty first", "", "emoji", "unit", LONG, LONG,
           "[CLS] <s>", "A cat sat."]


def byte_level_bpe() -> Tokenizer:
    backend = Tokenizer(models.BPE(unk_token=None))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
    backend.train_from_iterator(CORPUS, trainers.BpeTrainer(
        vocab_size=300, special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False))
    return backend


def word_piece_vocab() -> dict[str, int]:
    backend = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    backend.train_from_iterator(CORPUS, trainers.WordPieceTrainer(
        vocab_size=250, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"],
        show_progress=False))
    return backend.get_vocab()


def bert():  # TemplateProcessing with type ids 0/1; returns token_type_ids
    return transformers.BertTokenizer(vocab=word_piece_vocab())


def roberta():  # RobertaProcessing: <s> A </s></s> B </s>
    import json

    model = json.loads(byte_level_bpe().to_str())["model"]
    merges = [tuple(m) if isinstance(m, list) else tuple(m.split(" ")) for m in model["merges"]]
    return transformers.RobertaTokenizer(vocab=model["vocab"], merges=merges)


def tiny():  # the project's test tokenizer: "$A </s> $B </s>", no type ids
    from trainers.tiny import build_tiny_tokenizer

    return build_tiny_tokenizer(CORPUS, vocab_size=300)


def no_post_processor():  # no template at all, yet token_type_ids are returned
    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=byte_level_bpe(), pad_token="<pad>",
        model_input_names=["input_ids", "token_type_ids", "attention_mask"])


def processor_sequence():  # Sequence(ByteLevel, Template): <s> A </s> B </s>, types 0/1
    backend = byte_level_bpe()
    specials = [(token, backend.token_to_id(token)) for token in ("<s>", "</s>")]
    backend.post_processor = processors.Sequence([
        processors.ByteLevel(trim_offsets=True),
        processors.TemplateProcessing(single="<s> $A </s>", pair="<s> $A </s> $B:1 </s>:1",
                                      special_tokens=specials)])
    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=backend, pad_token="<pad>",
        model_input_names=["input_ids", "token_type_ids", "attention_mask"])


BUILDS = [bert, roberta, tiny, no_post_processor, processor_sequence]


@pytest.mark.parametrize("build", BUILDS)
@pytest.mark.parametrize("max_length", [12, 40, 2048])
def test_assembled_pairs_equal_the_tokenizer_call(build, max_length):
    tokenizer = build()
    expected = call_tokenizer(tokenizer, FIRSTS, SECONDS, max_length)
    assert any(len(f["input_ids"]) == max_length for f in expected) == (max_length < 2048)
    encoder = PairEncoder(tokenizer, max_length)
    assert encoder.state == "unchecked"
    assert encoder(FIRSTS, SECONDS) == expected
    assert encoder.state == "on"
    assert encoder(SECONDS, FIRSTS) == call_tokenizer(tokenizer, SECONDS, FIRSTS, max_length)
    with_types = build in (bert, no_post_processor, processor_sequence)
    if build is processor_sequence:  # the second text and its end are segment 1
        assert [f["token_type_ids"][-1] for f in expected] == [1] * len(expected)
    assert ("token_type_ids" in expected[0]) == with_types


@pytest.mark.parametrize("build", [bert, roberta, tiny, processor_sequence])
@pytest.mark.parametrize("max_length", [8, 9])
def test_every_length_pair_after_the_check_equals_the_call(build, max_length):
    """Past the first (checked) call nothing rescues a wrong assembly: every pair of lengths
    up to twice max_length, with 2, 3 and 4 special tokens and odd and even room, must come
    out as the call's (longest-first gives an odd leftover token to the longer text)."""
    tokenizer = build()
    encoder = PairEncoder(tokenizer, max_length)
    encoder(["The cat sat."], ["A dog ran."])
    assert encoder.state == "on"
    lengths = range(2 * max_length + 1)
    firsts = ["cat " * i for i in lengths for _ in lengths]
    seconds = ["mat " * j for _ in lengths for j in lengths]
    expected = call_tokenizer(tokenizer, firsts, seconds, max_length)
    assert sum(len(f["input_ids"]) == max_length for f in expected) > len(expected) // 2
    assert encoder(firsts, seconds) == expected
    assert encoder.state == "on"
    lazy = encoder(firsts, seconds, lazy=True)  # lengths known before any pair is built
    assert lazy.lengths == feature_lengths(expected) == [len(f["input_ids"]) for f in expected]
    assert list(lazy) == expected and lazy[-1] == expected[-1]


def test_lazy_pairs_are_built_when_read_and_checked_like_the_list():
    tokenizer = bert()
    encoder = PairEncoder(tokenizer, 12)
    expected = call_tokenizer(tokenizer, FIRSTS, SECONDS, 12)
    lazy = encoder(FIRSTS, SECONDS, lazy=True)
    assert isinstance(lazy, AssembledPairs) and encoder.state == "on"  # checked on this call
    assert len(lazy) == len(expected) and [lazy[i] for i in range(len(lazy))] == expected
    assert feature_lengths(lazy) == [len(f["input_ids"]) for f in expected]
    assert lazy[0] is not lazy[0] and lazy[0] == lazy[0]  # a fresh dict per read
    with pytest.raises(TypeError, match="by integer index"):
        lazy[0:2]
    with pytest.raises(IndexError):
        lazy[len(expected)]
    slow = PairEncoder(transformers.ByT5Tokenizer(), 20)  # no shortcut: the call's list
    assert slow(FIRSTS, SECONDS, lazy=True) == call_tokenizer(slow.tokenizer, FIRSTS,
                                                              SECONDS, 20)


def test_changes_to_the_tokenizer_after_the_first_call_are_followed():
    tokenizer = bert()
    encoder = PairEncoder(tokenizer, 12)
    encoder(FIRSTS, SECONDS)
    assert encoder.state == "on"
    tokenizer.truncation_side = "left"
    tokenizer.add_tokens(["newword"])
    pairs = (["cat sat on the mat " * 3, "newword here"], ["newword", "the cat " * 9])
    expected = call_tokenizer(tokenizer, *pairs, 12)
    assert tokenizer.convert_tokens_to_ids("newword") in expected[0]["input_ids"]
    assert encoder(*pairs) == expected
    assert encoder.state == "on"  # new copies, checked again on this call
    tokenizer.split_special_tokens = True
    assert encoder(FIRSTS, SECONDS) == call_tokenizer(tokenizer, FIRSTS, SECONDS, 12)


def test_left_truncation_and_split_special_tokens_follow_the_tokenizer():
    tokenizer = bert()
    tokenizer.truncation_side = "left"
    tokenizer.split_special_tokens = True
    expected = call_tokenizer(tokenizer, FIRSTS, SECONDS, 14)
    encoder = PairEncoder(tokenizer, 14)
    assert encoder(FIRSTS, SECONDS) == expected
    assert encoder.state == "on"  # assembled alike, not rescued by the check
    cls_id = tokenizer.convert_tokens_to_ids("[CLS]")
    assert expected[8]["input_ids"].count(cls_id) == 1  # "[CLS]" in the text was split
    left = call_tokenizer(tokenizer, [LONG], ["unit"], 14)[0]["input_ids"]
    kept = left[1:left.index(tokenizer.sep_token_id)]
    whole = tokenizer(LONG, add_special_tokens=False)["input_ids"]
    assert kept == whole[-len(kept):] != whole[:len(kept)]  # the end of the long text is kept


class SpokenUpper(transformers.BertTokenizer):
    """A tokenizer whose call does more than its Rust backend (it upper-cases the second
    text in Python first), as some tokenizers pre-process text in Python."""

    def _encode_plus(self, text, text_pair=None, **kwargs):
        if isinstance(text_pair, list):
            text_pair = [t.upper() for t in text_pair]
        return super()._encode_plus(text, text_pair, **kwargs)


def test_a_tokenizer_whose_call_differs_falls_back_with_a_warning(capsys):
    tokenizer = SpokenUpper(vocab=word_piece_vocab(), do_lower_case=False)
    encoder = PairEncoder(tokenizer, 64)
    expected = call_tokenizer(tokenizer, FIRSTS, SECONDS, 64)
    assert encoder(FIRSTS, SECONDS) == expected
    assert encoder.state.startswith("off: pair 0 differs from the tokenizer call")
    assert encoder.template == "off: no pair encoding"
    assert "using the tokenizer call" in capsys.readouterr().err
    assert encoder(SECONDS, FIRSTS) == call_tokenizer(tokenizer, SECONDS, FIRSTS, 64)
    assert encoder(SECONDS, FIRSTS, lazy=True) == call_tokenizer(tokenizer, SECONDS, FIRSTS, 64)


def test_slow_tokenizers_and_impossible_lengths_use_the_call():
    slow = transformers.ByT5Tokenizer()
    encoder = PairEncoder(slow, 20)
    assert encoder.state == "off: ByT5Tokenizer is not a fast (Rust) tokenizer"
    assert encoder(FIRSTS, SECONDS) == call_tokenizer(slow, FIRSTS, SECONDS, 20)

    short = PairEncoder(bert(), 2)
    assert short.state == "off: max_length 2 is shorter than a pair's 3 special tokens"
    assert PairEncoder(bert(), 3).state == "unchecked"
    assert PairEncoder(bert(), 64, enabled=False).state == "off: turned off"


def test_empty_and_mismatched_inputs():
    encoder = PairEncoder(bert(), 32)
    assert encoder([], []) == [] and encoder.state == "unchecked"  # nothing was checked
    with pytest.raises(ValueError, match="2 first texts but 1 second texts"):
        encoder(["a", "b"], ["c"])


def test_realsumm_pairs_equal_the_tokenizer_call(pyramid_data_dir):
    """Every system's summary against every SCU of three examples (as a Pyramid run pairs
    them): 1 summary text in about 11 pairs, the same ids as the tokenizer call."""
    from tasks.qapyramid.pyramid_data import load_pyramid_dataset
    from trainers.tiny import build_tiny_tokenizer

    dataset = load_pyramid_dataset(pyramid_data_dir / "realsumm", labels=False)
    tokenizer = build_tiny_tokenizer(list(dataset.references))
    pairs = [(dataset.summaries[system][i], unit) for i in range(3)
             for system in dataset.systems for unit in dataset.units["scus"][i]]
    firsts, seconds = zip(*pairs)
    assert len(pairs) > 8 * len(set(firsts))
    encoder = PairEncoder(tokenizer, 400)
    assert encoder(firsts, seconds) == call_tokenizer(tokenizer, firsts, seconds, 400)
    assert encoder.state == "on"


@pytest.mark.parametrize("build", BUILDS)
def test_template_processors_build_untruncated_pairs_from_their_template(build):
    """The fixed parts are read from the library's own post_process; a pair that fits is
    built from them (a wrong template shows up in exactly those pairs), a truncated pair
    goes through post_process."""
    encoder = PairEncoder(build(), 12)
    assert encoder.template == "on"
    right = encoder(FIRSTS, SECONDS, lazy=True)
    assert encoder.state == "on"
    fits = [i for i in range(len(FIRSTS)) if len(right._encodings[i][0]) +
            len(right._encodings[i][1]) + right._specials <= 12]
    assert 0 < len(fits) < len(FIRSTS)
    wrong = pair_encoding.PairTemplate([999], [], [], [0], 0, [], 0, [])
    marked = AssembledPairs(right._encodings, right._backend, 12, False, wrong)
    for i in range(len(FIRSTS)):
        ids = marked[i]["input_ids"]
        assert (ids[0] == 999) == (i in fits)
        if i not in fits:
            assert ids == right[i]["input_ids"] and len(ids) == 12


def test_other_post_processors_and_unclear_probes_get_no_template(monkeypatch):
    monkeypatch.setattr(pair_encoding, "TEMPLATE_PROCESSORS", frozenset({"BertProcessing"}))
    tokenizer = processor_sequence()
    encoder = PairEncoder(tokenizer, 12)
    assert encoder.template == "off: the ByteLevel, TemplateProcessing post-processor"
    assert encoder(FIRSTS, SECONDS) == call_tokenizer(tokenizer, FIRSTS, SECONDS, 12)
    assert encoder.state == "on"
    monkeypatch.undo()
    monkeypatch.setattr(pair_encoding, "PROBE_TEXTS", ("", "a probe"))
    assert PairEncoder(bert(), 12).template == \
        "off: the probe pair does not show where the texts go"
    assert PairEncoder(bert(), 12, enabled=False).template == "off: no pair encoding"


def word_level(pair_template: str):
    """A word-level tokenizer with no unknown token (it cannot encode unseen words)."""
    vocab = {"[CLS]": 0, "[SEP]": 1, "<pad>": 2, "the": 3, "cat": 4, "sat": 5, "mat": 6}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    backend.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair=pair_template, special_tokens=[("[CLS]", 0), ("[SEP]", 1)])
    return transformers.PreTrainedTokenizerFast(tokenizer_object=backend, pad_token="<pad>")


def test_tokenizers_that_cannot_encode_the_probes_still_assemble_pairs():
    tokenizer = word_level("[CLS] $A [SEP] $B:1 [SEP]:1")
    encoder = PairEncoder(tokenizer, 9)
    assert encoder.template.startswith("off: the probe texts cannot be encoded (WordLevel")
    firsts, seconds = ["the cat sat", "the mat", "cat"], ["the mat", "the cat sat mat", "sat"]
    expected = call_tokenizer(tokenizer, firsts, seconds, 9)
    assert expected[1]["input_ids"] == [0, 3, 6, 1, 3, 4, 5, 6, 1]
    assert encoder(firsts, seconds) == expected
    assert encoder.state == "on"


def test_a_template_that_repeats_a_text_is_refused():
    """The parts read from the probe pair would hold the probe's own first text; the check
    pair shows that. (Short pairs only: the library's truncation takes half a minute on two
    long texts with such a template.)"""
    backend = byte_level_bpe()
    specials = [(token, backend.token_to_id(token)) for token in ("<s>", "</s>")]
    backend.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", pair="<s> $A </s> $B:1 </s>:1 $A:1", special_tokens=specials)
    tokenizer = transformers.PreTrainedTokenizerFast(tokenizer_object=backend, pad_token="<pad>")
    encoder = PairEncoder(tokenizer, 40)
    assert encoder.template == \
        "off: the template read from the probe pair does not fit a second pair"
    firsts, seconds = FIRSTS[:5] + FIRSTS[8:], SECONDS[:5] + SECONDS[8:]
    assert encoder(firsts, seconds) == call_tokenizer(tokenizer, firsts, seconds, 40)
