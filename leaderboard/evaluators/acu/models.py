"""The checkpoints of AutoACU's metrics, loaded on any device with their kind checked: the A2CU
generator (a T5), the A2CU classifier (a DeBERTa NLI classifier whose label 2 is entailment)
and A3CU (a BERT with a one-output linear head on the first token, `linear.weight`).

The official package loads its tokenizers by hard-coded hub names (the generator's from
`bigscience/T0_3B`, the classifier's from `microsoft/deberta-xlarge-mnli`): here they are
options whose defaults are those names. A3CU reads the tokenizer of its own folder, as the
official code does. A checkpoint of another kind (a T5 given as the classifier, a classifier
without its head) is a one-line SumbenchError naming the option."""
from __future__ import annotations

import functools
from typing import Any

from tasks.plumbing.errors import SumbenchError
from trainers.inference.generation import resolve_device
from trainers.models.model_loading import check_model_source, load_errors, load_failure

GENERATOR = "Yale-LILY/a2cu-generator"
GENERATOR_TOKENIZER = "bigscience/T0_3B"
CLASSIFIER = "Yale-LILY/a2cu-classifier"
CLASSIFIER_TOKENIZER = "microsoft/deberta-xlarge-mnli"
A3CU_MODEL = "Yale-LILY/a3cu"
#: the classifier's entailment label (autoacu==0.1.0:autoacu/a2cu.py:185)
ENTAILMENT = 2

#: model types each role accepts (the official classes: T5, DeBERTa, BERT)
KINDS = {"generator": ("t5",), "classifier": ("deberta", "deberta-v2"), "a3cu": ("bert",)}


def model_type(name: str, what: str) -> str:
    """The `model_type` of the checkpoint `name` (a folder or hub id); a one-line error when it
    cannot be read."""
    from transformers import AutoConfig

    check_model_source(name, what)
    try:
        return AutoConfig.from_pretrained(name).model_type
    except load_errors() as error:
        raise load_failure(name, error, what) from None


def check_kind(name: str, role: str, what: str) -> None:
    found = model_type(name, what)
    if found not in KINDS[role]:
        raise SumbenchError(f"{what} {name} is a {found} checkpoint, not a "
                            f"{' or '.join(KINDS[role])} one")


def load_tokenizer(name: str, what: str):
    from transformers import AutoTokenizer

    check_model_source(name, what)
    try:
        return AutoTokenizer.from_pretrained(name)
    except load_errors() as error:
        raise load_failure(name, error, f"{what}'s tokenizer") from None


def _loaded(auto_class: Any, name: str, what: str, head: str):
    """`auto_class.from_pretrained(name)` in eval mode; a checkpoint without the weights of
    `head` (the part that makes it this kind of model) is an error, not a random head."""
    try:
        model, info = auto_class.from_pretrained(name, output_loading_info=True)
    except load_errors() as error:
        raise load_failure(name, error, what) from None
    missing = [key for key in info.get("missing_keys", ()) if key.startswith(head)]
    if missing:
        raise SumbenchError(f"{what} {name} has no trained {head!r} weights ({missing[0]} is "
                            f"missing): not a checkpoint of this kind")
    return model.eval()


def load_generator(name: str, tokenizer: str, device: str):
    """(T5 model on `device`, tokenizer) of the A2CU generator."""
    from transformers import AutoModelForSeq2SeqLM

    what = "the A2CU generator"
    check_kind(name, "generator", what)
    model = _loaded(AutoModelForSeq2SeqLM, name, what, "lm_head")
    return model.to(resolve_device(device)), load_tokenizer(tokenizer, what)


def load_classifier(name: str, tokenizer: str, device: str):
    """(DeBERTa classifier on `device`, tokenizer) of A2CU's matching; it needs an entailment
    output at index 2."""
    from transformers import AutoModelForSequenceClassification

    what = "the A2CU classifier"
    check_kind(name, "classifier", what)
    model = _loaded(AutoModelForSequenceClassification, name, what, "classifier")
    if model.config.num_labels <= ENTAILMENT:
        raise SumbenchError(f"{what} {name} has {model.config.num_labels} labels; A2CU reads "
                            f"label {ENTAILMENT} (entailment) of an NLI classifier")
    return model.to(resolve_device(device)), load_tokenizer(tokenizer, what)


@functools.lru_cache(maxsize=1)
def linear_head_bert_class():
    """A BERT with a one-output linear head on the first token's last hidden state (A3CU's
    shape, autoacu==0.1.0:autoacu/a3cu.py:10-20), as a transformers model class."""
    from torch import nn
    from transformers import BertModel, BertPreTrainedModel

    class LinearHeadBert(BertPreTrainedModel):
        def __init__(self, config):
            super().__init__(config)
            self.bert = BertModel(config)
            self.linear = nn.Linear(config.hidden_size, 1)
            self.post_init()

        def forward(self, input_ids, attention_mask, token_type_ids):
            hidden = self.bert(input_ids=input_ids, attention_mask=attention_mask,
                               token_type_ids=token_type_ids)[0]
            return self.linear(hidden[:, 0, :]).squeeze(-1)

    return LinearHeadBert


def load_a3cu(name: str, device: str):
    """(A3CU model on `device`, the tokenizer of its folder)."""
    what = "the A3CU model"
    check_kind(name, "a3cu", what)
    model = _loaded(linear_head_bert_class(), name, what, "linear")
    return model.to(resolve_device(device)), load_tokenizer(name, what)
