"""Record MiniCheck's official `Inferencer` outputs on tiny local models (run by hand; the
tests call only `build_models`, to rebuild the models; README.md says how).

    python tests/data/minicheck_official/record.py --official DIR [--out FOLDER]

DIR holds the official package folder `minicheck/` (inference.py, minicheck.py, utils.py of
Liyan06/MiniCheck at b58b9fa). They are copied to a temporary folder with a blank
`__init__.py` (the original one calls `nltk.download('punkt')`, a download); Punkt's English
model comes from tasks.plumbing.punkt. The hub names the official code hard-codes
(`lytang/MiniCheck-*`) are served from the tiny models' folders; nothing else is changed.

Writes into FOLDER (default: this folder): `models/{roberta,deberta,t5}/` (seeded tiny models
and tokenizers, saved once) and `recorded.json` (per pair: the max support probability, the
per-chunk probabilities, the label; per document: the chunks the official code scored).
"""
from __future__ import annotations

import argparse
import importlib
import json
import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parents[2]
sys.path.insert(0, str(REPO_ROOT))

DOCUMENTS = [
    "The storm hit the coast on Monday. Mr. Lee said the damage was severe. Power was cut to "
    "3,000 homes.\nRepairs began on Tuesday. Crews worked through the night.",
    "A new bridge opened in the city. It cost 40 million dollars. Drivers said the trip is "
    "now shorter. The mayor cut the ribbon at noon. Some residents complained about the noise "
    "during building. Officials promised quieter work next year. The old bridge will close "
    "in May. It was built in 1921 and needs repairs. Traffic is expected to rise.",
    "Scientists at the university found that the small fish which live in the cold northern "
    "lakes can survive for several weeks without any food at all during the long dark winter "
    "months when the ice covers the water. They published the study on Friday.",
    "Only one line without a final stop",
    "\n\nThe team won the final.  It was their first title.\n\nFans celebrated in the streets.\n",
]
CLAIMS = [
    "Power was cut to homes.",
    "Repairs began on Tuesday. Crews rested all night.",
    "",
    "Who won the final? The team.",
    "The bridge cost 40 million dollars and the old bridge will close in May after serving the "
    "city for a century.",
]
#: (variant, model folder, official model_name) and the settings recorded for each
VARIANTS = (("roberta-large", "roberta"), ("deberta-v3-large", "deberta"),
            ("flan-t5-large", "t5"))
SETTINGS = ({"chunk_size": None, "max_model_len": None},
            {"chunk_size": 45, "max_model_len": None},
            {"chunk_size": None, "max_model_len": 40})
SMALL_WORD_CHUNK = 12  # the flan-t5 chunk_size in the small-chunk setting (words)
#: weight scales of the tiny models: outputs that vary from input to input (a random model
#: at the usual 0.02 gives ~0.4999 for every pair, which would hide a wrong input)
INIT_RANGE = 0.5
T5_SPREAD = 1.0
BATCH_SIZE = 2
HUB_NAMES = {"lytang/MiniCheck-RoBERTa-Large": "roberta",
             "lytang/MiniCheck-DeBERTa-v3-Large": "deberta",
             "lytang/MiniCheck-Flan-T5-Large": "t5"}


def training_texts() -> list[str]:
    return (DOCUMENTS + CLAIMS) * 5


def deberta_tokenizer(texts):
    """A byte-level BPE laid out as DeBERTa-v3's tokenizer: [PAD] 0, [CLS] 1, [SEP] 2,
    [UNK] 3, [MASK] 4; `[CLS] A [SEP]`; eos = [SEP]."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    specials = ["[PAD]", "[CLS]", "[SEP]", "[UNK]", "[MASK]"]
    backend = Tokenizer(models.BPE(unk_token=None))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
    backend.decoder = decoders.ByteLevel()
    backend.train_from_iterator(texts, trainer=trainers.BpeTrainer(
        vocab_size=300, special_tokens=specials, show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    backend.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B [SEP]",
        special_tokens=[("[CLS]", 1), ("[SEP]", 2)])
    return PreTrainedTokenizerFast(
        tokenizer_object=backend, pad_token="[PAD]", cls_token="[CLS]", sep_token="[SEP]",
        eos_token="[SEP]", unk_token="[UNK]", mask_token="[MASK]", model_max_length=2048,
        padding_side="right")


def build_models(folder: Path, seed: int = 67) -> None:
    """The three tiny models (2 labels; a T5 with ids 3 and 209), saved under `folder`."""
    import torch
    from transformers import (
        DebertaV2Config,
        DebertaV2ForSequenceClassification,
        RobertaForSequenceClassification,
    )

    from trainers.models.tiny import (
        build_tiny_roberta_tokenizer,
        build_tiny_t5,
        build_tiny_tokenizer,
        tiny_roberta_config,
    )

    texts = training_texts()
    tokenizer = build_tiny_roberta_tokenizer(texts, vocab_size=300)
    config = tiny_roberta_config(len(tokenizer), tokenizer.pad_token_id, dropout=0.0,
                                 hidden_size=16)
    config.num_labels, config.initializer_range = 2, INIT_RANGE
    torch.manual_seed(seed)
    model = center_classifier(RobertaForSequenceClassification(config), tokenizer)
    model.save_pretrained(folder / "roberta")
    tokenizer.save_pretrained(folder / "roberta")

    tokenizer = deberta_tokenizer(texts)
    config = DebertaV2Config(
        vocab_size=len(tokenizer), hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=32, max_position_embeddings=512, relative_attention=True,
        position_buckets=32, norm_rel_ebd="layer_norm", share_att_key=True,
        pos_att_type=["p2c", "c2p"], position_biased_input=False, type_vocab_size=0,
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, num_labels=2,
        pad_token_id=tokenizer.pad_token_id, initializer_range=INIT_RANGE)
    torch.manual_seed(seed + 1)
    model = center_classifier(DebertaV2ForSequenceClassification(config), tokenizer)
    model.save_pretrained(folder / "deberta")
    tokenizer.save_pretrained(folder / "deberta")

    tokenizer = build_tiny_tokenizer(texts, vocab_size=300)
    model = build_tiny_t5(tokenizer, seed=seed + 2, d_model=16, num_layers=1, num_heads=2)
    spread_label_rows(model, tokenizer, seed + 3)
    model.save_pretrained(folder / "t5")
    tokenizer.save_pretrained(folder / "t5")


def recorded_inputs(tokenizer, prefix: str = "") -> list[str]:
    """Every (document, claim) input string of the recording, whole documents."""
    return [prefix + document + tokenizer.eos_token + claim
            for document in DOCUMENTS for claim in CLAIMS]


def center_classifier(model, tokenizer):
    """Shift the supported class's output bias by the median logit difference over the
    recorded inputs, so that P(supported) straddles 0.5 (both labels occur)."""
    import torch

    head = getattr(model.classifier, "out_proj", model.classifier)
    encoded = tokenizer(recorded_inputs(tokenizer), padding=True, return_tensors="pt")
    with torch.no_grad():
        logits = model.eval()(**encoded).logits
        head.bias[1] -= (logits[:, 1] - logits[:, 0]).median()
    return model


def spread_label_rows(model, tokenizer, seed: int) -> None:
    """Row 209 ("supported") of the tiny T5's output layer = row 3 plus seeded noise, then
    moved along the mean decoder state so that the median logit difference over the recorded
    inputs is about 0: P(supported) varies around 0.5 instead of sitting near 0."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    rows = model.lm_head.weight
    encoded = tokenizer(recorded_inputs(tokenizer, "predict: "), padding=True,
                        return_tensors="pt")
    start = torch.zeros((encoded["input_ids"].shape[0], 1), dtype=torch.long)
    with torch.no_grad():
        rows[209] = rows[3] + T5_SPREAD * torch.randn(rows.shape[1], generator=generator)
        states = model.eval()(**encoded, decoder_input_ids=start,
                              output_hidden_states=True).decoder_hidden_states[-1][:, 0]
        difference = (states @ (rows[209] - rows[3])).median()
        mean = states.mean(0)
        rows[209] -= difference * mean / mean.dot(mean)


def official_module(official: Path, workdir: Path):
    """minicheck.minicheck imported from a copy of the official files, __init__ blank."""
    package = workdir / "minicheck"
    package.mkdir()
    for name in ("inference.py", "minicheck.py", "utils.py"):
        shutil.copy(official / "minicheck" / name, package / name)
    (package / "__init__.py").write_text("# blank: the original downloads NLTK's punkt\n")
    sys.path.insert(0, str(workdir))
    import tasks.plumbing.punkt  # noqa: F401  (NLTK's English Punkt without a download)

    return importlib.import_module("minicheck.minicheck")


class LocalHub:
    """An Auto* class whose from_pretrained serves the official hub names from local folders."""

    def __init__(self, auto, folder: Path):
        self.auto, self.folder = auto, folder

    def from_pretrained(self, name, *args, **kwargs):
        return self.auto.from_pretrained(str(self.folder / HUB_NAMES[name]), *args, **kwargs)


def serve_locally(inference, folder: Path) -> None:
    for name in ("AutoConfig", "AutoTokenizer", "AutoModelForSeq2SeqLM",
                 "AutoModelForSequenceClassification"):
        setattr(inference, name, LocalHub(getattr(inference, name), folder))


def record_run(module, variant: str, setting: dict) -> dict:
    """One official MiniCheck over every (document, claim) pair: its outputs and, per
    document, the chunks Inferencer.inference received."""
    inference = sys.modules["minicheck.inference"]
    seen: list = []
    original = inference.Inferencer.inference

    def capture(self, doc, claim):
        seen.append(list(doc))
        return original(self, doc, claim)

    inference.Inferencer.inference = capture
    try:
        checker = module.MiniCheck(model_name=variant, max_model_len=setting["max_model_len"],
                                   batch_size=BATCH_SIZE)
        chunk_size = setting["chunk_size"]
        if chunk_size and variant == "flan-t5-large":
            chunk_size = SMALL_WORD_CHUNK
        pairs = [(d, c) for d in range(len(DOCUMENTS)) for c in range(len(CLAIMS))]
        labels, probs, _, per_chunk = checker.score([DOCUMENTS[d] for d, _ in pairs],
                                                    [CLAIMS[c] for _, c in pairs],
                                                    chunk_size=chunk_size)
        empty = empty_document_error(checker, chunk_size)
    finally:
        inference.Inferencer.inference = original
    chunks = {d: seen[index] for index, (d, _) in enumerate(pairs)}
    return {"variant": variant, "chunk_size": chunk_size, "batch_size": BATCH_SIZE,
            "max_model_len": checker.model.max_model_len,
            "doc_chunks": [chunks[d] for d in range(len(DOCUMENTS))],
            "pairs": [{"doc": d, "claim": c, "label": int(label),
                       "max_support_prob": float(prob),
                       "support_prob_per_chunk": [float(v) for v in chunk_probs]}
                      for (d, c), label, prob, chunk_probs in zip(pairs, labels, probs,
                                                                 per_chunk)],
            "empty_document_error": empty}


def empty_document_error(checker, chunk_size) -> str | None:
    """What the official code does with an empty document (it fails: no chunk to score)."""
    try:
        checker.score([""], ["A claim."], chunk_size=chunk_size)
    except Exception as error:  # noqa: BLE001 - recording whatever it raises
        return f"{type(error).__name__}: {str(error).splitlines()[0]}"
    return None


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--official", required=True, type=Path,
                        help="folder holding the official minicheck/ package")
    parser.add_argument("--out", type=Path, default=HERE)
    args = parser.parse_args(argv)
    import torch
    import transformers

    models = args.out / "models"
    if not models.exists():
        build_models(models)
    with tempfile.TemporaryDirectory() as workdir:
        module = official_module(args.official, Path(workdir))
        serve_locally(sys.modules["minicheck.inference"], models)
        runs = [record_run(module, variant, setting)
                for variant, _ in VARIANTS for setting in SETTINGS]
    versions = {"torch": torch.__version__, "transformers": transformers.__version__,
                "nltk": importlib.import_module("nltk").__version__}
    out = {"source": "Liyan06/MiniCheck b58b9fa69acbd1015ec970fa65dd752413a053d2",
           "versions": versions, "documents": DOCUMENTS, "claims": CLAIMS,
           "models": {variant: folder for variant, folder in VARIANTS}, "runs": runs}
    (args.out / "recorded.json").write_text(json.dumps(out, indent=1, ensure_ascii=False)
                                            + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
