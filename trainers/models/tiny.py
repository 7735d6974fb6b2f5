"""Tiny, locally built tokenizers and models (T5, Llama, GPT-2, BERT) for tests, benchmarks and
the offline demo.

Nothing here touches the network: the tokenizer is trained on the texts given, and the model is
randomly initialised from a small config with a fixed seed.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TypeVar

Model = TypeVar("Model")

#: special tokens in T5's order: pad=0, eos=1, unk=2
SPECIAL_TOKENS = ("<pad>", "</s>", "<unk>")
#: words every tiny vocabulary must hold as single tokens (label words and prompt cue words)
REQUIRED_WORDS = ("Yes", "No", "yes", "no", "SENT", "present", "not")


def build_tiny_tokenizer(texts: Iterable[str], save_dir: str | Path | None = None,
                         vocab_size: int = 800, strip_leading_space: bool = False,
                         whole_words: Sequence[str] = ()):
    """Train a byte-level BPE tokenizer on `texts`; returns a `PreTrainedTokenizerFast`.

    Byte-level coverage means any text encodes; the required label words are guaranteed to be
    single tokens (with and without a leading space), so Yes/No probabilities can be read off.
    `strip_leading_space`: decoding drops the space the byte-level pre-tokenizer puts before
    the first word (as SentencePiece does), so a copied sentence decodes exactly.
    `whole_words` become single tokens (with and without a leading space; e.g. the SENTk
    markers of the line tasks, which byte-level BPE would cut into "SENT" and a number).
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    backend = Tokenizer(models.BPE(unk_token=None))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
    backend.decoder = decoders.Sequence([decoders.ByteLevel(), decoders.Strip(" ", 1, 0)]) \
        if strip_leading_space else decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=list(SPECIAL_TOKENS),
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    label_lines = [" ".join(REQUIRED_WORDS)] * 200
    backend.train_from_iterator([*texts, *label_lines], trainer=trainer)
    eos_id = backend.token_to_id("</s>")
    backend.post_processor = processors.TemplateProcessing(
        single="$A </s>", pair="$A </s> $B </s>", special_tokens=[("</s>", eos_id)])
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend, pad_token="<pad>", eos_token="</s>", unk_token="<unk>",
        model_max_length=4096, padding_side="right", clean_up_tokenization_spaces=False)
    if whole_words:
        from tokenizers import AddedToken

        tokenizer.add_tokens([AddedToken(prefix + word, normalized=False)
                              for word in whole_words for prefix in (" ", "")])
    _check_single_tokens(tokenizer)
    if save_dir is not None:
        tokenizer.save_pretrained(str(Path(save_dir).resolve()))
    return tokenizer


def _check_single_tokens(tokenizer) -> None:
    for word in ("Yes", "No"):
        for text in (word, f"SENT0 {word}"):
            ids = tokenizer(text, add_special_tokens=False)["input_ids"]
            pieces = tokenizer.convert_ids_to_tokens(ids)
            if not any(piece.lstrip("Ġ") == word for piece in pieces):
                raise RuntimeError(f"tiny tokenizer splits {word!r} in {text!r}: {pieces}")


def build_tiny_t5(tokenizer, save_dir: str | Path | None = None, seed: int = 0,
                  d_model: int = 64, num_layers: int = 2, num_heads: int = 4,
                  tie_embeddings: bool = False, relative_buckets: int = 8,
                  line_heads: bool = False, d_ff: int | None = None,
                  vocab_size: int | None = None):
    """A randomly initialised T5 (seeded) sized for CPU tests; saved when `save_dir` is given.
    `tie_embeddings` shares the input and output embeddings (as T5 v1.0 does: copying input
    words is learnt much faster); `relative_buckets` is T5's relative-position resolution;
    `line_heads` starts two heads in a useful place (see `init_line_heads`). `d_ff` (default
    2 x d_model) and `vocab_size` (default the tokenizer's; a published config's may be
    larger) give real shapes, e.g. Flan-T5-base: d_model 768, 12 layers and heads, d_ff 2048,
    32 buckets, vocab_size 32128."""
    from transformers import T5Config, T5ForConditionalGeneration

    config = T5Config(
        vocab_size=vocab_size or len(tokenizer), d_model=d_model, d_kv=d_model // num_heads,
        d_ff=d_ff or d_model * 2, num_layers=num_layers, num_decoder_layers=num_layers,
        num_heads=num_heads, relative_attention_num_buckets=relative_buckets, dropout_rate=0.0,
        feed_forward_proj="gated-gelu", tie_word_embeddings=tie_embeddings,
        pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
        decoder_start_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.pad_token_id)
    model = _seeded_init(seed, lambda: T5ForConditionalGeneration(config))
    if line_heads:
        init_line_heads(model)
    model.generation_config.decoder_start_token_id = tokenizer.pad_token_id
    return _finish_generator(model, tokenizer, save_dir)


#: relative-position bias of the encoder's look-ahead head, and the query/key scale of the
#: decoder's token-matching heads (scores of about 10 for a token against itself)
LOOK_AHEAD_BIAS = 10.0
MATCH_SCALE = 3.0


def init_line_heads(model) -> None:
    """Start head 0 of the first encoder layer looking one token ahead (so a `SENTk` marker
    carries the first word of its line) and head 0 of every decoder cross-attention matching
    identical tokens (equal query and key weights: the decoder finds the `SENTk` it is
    labelling in the input). A random tiny T5 must otherwise discover this alignment before
    the line tasks (EXT, EVEXT) can learn anything, which takes far longer than the demo's
    training; every weight stays trainable. Deterministic: no random numbers are drawn."""
    import torch
    from transformers.models.t5.modeling_t5 import T5Attention

    encoder = model.encoder.block[0].layer[0].SelfAttention
    ahead = T5Attention._relative_position_bucket(
        torch.tensor(1), bidirectional=True, num_buckets=encoder.relative_attention_num_buckets,
        max_distance=encoder.relative_attention_max_distance)
    head = slice(0, model.config.d_kv)
    with torch.no_grad():
        bias = encoder.relative_attention_bias.weight
        bias[:, 0] = 0.0
        bias[int(ahead), 0] = LOOK_AHEAD_BIAS
        for block in model.decoder.block:
            cross = block.layer[1].EncDecAttention
            cross.q.weight[head] *= MATCH_SCALE
            cross.k.weight[head] = cross.q.weight[head]


def _tiny_bert_config(tokenizer, labels, hidden: int):
    """A 2-layer, 4-head BERT config over the tokenizer's vocabulary with these label names."""
    from transformers import BertConfig

    return BertConfig(
        vocab_size=len(tokenizer), hidden_size=hidden, num_hidden_layers=2,
        num_attention_heads=4, intermediate_size=hidden * 2, max_position_embeddings=1024,
        pad_token_id=tokenizer.pad_token_id, num_labels=len(labels),
        id2label=dict(enumerate(labels)), label2id={name: i for i, name in enumerate(labels)})


def build_tiny_classifier(tokenizer, labels=("entailment", "neutral", "contradiction"),
                          save_dir: str | Path | None = None, seed: int = 0, hidden: int = 64):
    """A randomly initialised BERT-style sequence classifier with the given label names."""
    from transformers import BertForSequenceClassification

    config = _tiny_bert_config(tokenizer, labels, hidden)
    model = _seeded_init(seed, lambda: BertForSequenceClassification(config))
    if save_dir is not None:
        _save(model, tokenizer, save_dir)
    return model


def build_tiny_token_classifier(tokenizer, labels=("O", "PREDICATE"),
                                save_dir: str | Path | None = None, seed: int = 0,
                                hidden: int = 64, favour: int | None = None):
    """A BERT-style token classifier (seeded), e.g. a stand-in predicate detector; with
    `favour`, that label's output bias is raised so that it wins for every token."""
    import torch
    from transformers import BertForTokenClassification

    config = _tiny_bert_config(tokenizer, labels, hidden)
    model = _seeded_init(seed, lambda: BertForTokenClassification(config))
    if favour is not None:
        with torch.no_grad():
            model.classifier.bias[favour] += 100.0
    if save_dir is not None:
        _save(model, tokenizer, save_dir)
        return Path(save_dir)
    return model


def build_tiny_bert_encoder(texts: Iterable[str], save_dir: str | Path, seed: int = 0,
                            hidden: int = 32, layers: int = 3, vocab_size: int = 200):
    """A cased WordPiece tokenizer trained on `texts` and a randomly initialised BERT encoder
    over it (BERTScore's model shape), both saved in `save_dir`."""
    from tokenizers import BertWordPieceTokenizer
    from transformers import BertConfig, BertModel, BertTokenizerFast

    wordpiece = BertWordPieceTokenizer(lowercase=False)
    wordpiece.train_from_iterator(list(texts), vocab_size=vocab_size,
                                  special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])
    tokenizer = BertTokenizerFast(tokenizer_object=wordpiece._tokenizer, cls_token="[CLS]",
                                  sep_token="[SEP]", pad_token="[PAD]", unk_token="[UNK]",
                                  mask_token="[MASK]", model_max_length=512)
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=hidden, num_hidden_layers=layers,
                        num_attention_heads=2, intermediate_size=hidden * 2,
                        max_position_embeddings=512, pad_token_id=tokenizer.pad_token_id)
    model = _seeded_init(seed, lambda: BertModel(config))
    _save(model.eval(), tokenizer, save_dir)
    return model


def build_tiny_causal_lm(tokenizer, save_dir: str | Path | None = None, seed: int = 0,
                         hidden: int = 64, num_layers: int = 2, num_heads: int = 4):
    """A randomly initialised decoder-only Llama-style model (seeded) sized for CPU tests."""
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=hidden, intermediate_size=hidden * 2,
        num_hidden_layers=num_layers, num_attention_heads=num_heads,
        num_key_value_heads=num_heads, max_position_embeddings=4096,
        pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
        bos_token_id=tokenizer.eos_token_id, tie_word_embeddings=False)
    return _finish_generator(_seeded_init(seed, lambda: LlamaForCausalLM(config)), tokenizer,
                             save_dir)


def build_tiny_gpt2(tokenizer, save_dir: str | Path | None = None, seed: int = 0,
                    n_positions: int = 256, hidden: int = 64, num_layers: int = 2,
                    num_heads: int = 4):
    """A randomly initialised GPT-2 (seeded): absolute positions, a context of `n_positions`
    tokens (a position past it is an error, not a silent degradation)."""
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(
        vocab_size=len(tokenizer), n_positions=n_positions, n_embd=hidden, n_layer=num_layers,
        n_head=num_heads, n_inner=hidden * 2, resid_pdrop=0.0, embd_pdrop=0.0,
        attn_pdrop=0.0, pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id, bos_token_id=tokenizer.eos_token_id)
    return _finish_generator(_seeded_init(seed, lambda: GPT2LMHeadModel(config)), tokenizer,
                             save_dir)


def _finish_generator(model, tokenizer, save_dir: str | Path | None):
    """Generation defaults from the tokenizer, saved when `save_dir` is given."""
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    if save_dir is not None:
        _save(model, tokenizer, save_dir)
    return model


def _seeded_init(seed: int, build: Callable[[], Model]) -> Model:
    """Run `build` with torch's global generators seeded, then restore every generator that
    `torch.manual_seed` touches (the CPU one and each CUDA device's)."""
    import torch

    with torch.random.fork_rng(devices=range(torch.cuda.device_count())):
        torch.manual_seed(seed)
        return build()


def _save(model, tokenizer, save_dir: str | Path) -> None:
    """Save the model and its tokenizer side by side in `save_dir` (an absolute path)."""
    save_dir = Path(save_dir).resolve()
    model.save_pretrained(str(save_dir))
    tokenizer.save_pretrained(str(save_dir))


#: RoBERTa's special tokens in its vocabulary order: <s>=0, <pad>=1, </s>=2, <unk>=3, <mask>=4
ROBERTA_SPECIAL_TOKENS = ("<s>", "<pad>", "</s>", "<unk>", "<mask>")


def build_tiny_roberta_tokenizer(texts: Iterable[str], vocab_size: int = 800,
                                 model_max_length: int = 512):
    """A byte-level BPE trained on `texts` laid out as RoBERTa's tokenizer: its special tokens
    (`ROBERTA_SPECIAL_TOKENS`), no prefix space (as `roberta-large`), and its post-processor
    (`RobertaProcessing`: `<s> A </s>`, pairs `<s> A </s></s> B </s>`, every type id 0,
    offsets trimmed of the spaces byte-level tokens carry); a `PreTrainedTokenizerFast`, so
    `return_offsets_mapping` works."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    backend = Tokenizer(models.BPE(unk_token=None))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True)
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size,
                                  special_tokens=list(ROBERTA_SPECIAL_TOKENS),
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    backend.train_from_iterator(list(texts), trainer=trainer)
    backend.post_processor = processors.RobertaProcessing(
        ("</s>", backend.token_to_id("</s>")), ("<s>", backend.token_to_id("<s>")),
        trim_offsets=True, add_prefix_space=False)
    return PreTrainedTokenizerFast(
        tokenizer_object=backend, bos_token="<s>", cls_token="<s>", eos_token="</s>",
        sep_token="</s>", pad_token="<pad>", unk_token="<unk>", mask_token="<mask>",
        model_max_length=model_max_length, padding_side="right",
        clean_up_tokenization_spaces=False)


def tiny_roberta_config(vocab_size: int, pad_token_id: int = 1, max_tokens: int = 512,
                        dropout: float = 0.1, hidden_size: int = 32):
    """A RobertaConfig sized for CPU tests (2 layers, 2 heads), RoBERTa's special ids
    (`<s>` 0, `</s>` 2) and `max_tokens` usable positions (RoBERTa's padding offset of 2)."""
    from transformers import RobertaConfig

    return RobertaConfig(vocab_size=vocab_size, hidden_size=hidden_size, num_hidden_layers=2,
                         num_attention_heads=2, intermediate_size=2 * hidden_size,
                         max_position_embeddings=max_tokens + 2, type_vocab_size=1,
                         pad_token_id=pad_token_id, bos_token_id=0, eos_token_id=2,
                         hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout)
