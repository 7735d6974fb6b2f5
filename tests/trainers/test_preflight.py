"""What fails after training is refused before the first step (trainers.finetuning.preflight): label
words that are not single tokens, a tokenizer larger than the model's embedding table,
budgets beyond a model's absolute positions; and throughput figures that read right at any
speed."""
from __future__ import annotations

import dataclasses

import pytest

from trainers.finetuning.finetune import finetune, throughput
from trainers.finetuning.preflight import check_before_training
from trainers.finetuning.profiles import SpecError, get_profile

from helpers import sumbench

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _tokenizer_without_yes(texts):
    """A byte-level BPE whose vocabulary never learnt "Yes": it takes two tokens or more."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    backend = Tokenizer(models.BPE(unk_token=None))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
    backend.decoder = decoders.ByteLevel()
    backend.train_from_iterator(texts, trainer=trainers.BpeTrainer(
        vocab_size=300, special_tokens=["<pad>", "</s>", "<unk>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False))
    return PreTrainedTokenizerFast(tokenizer_object=backend, pad_token="<pad>",
                                   eos_token="</s>", unk_token="<unk>")


@pytest.fixture(scope="module")
def no_yes_model(tmp_path_factory):
    from trainers.models.tiny import build_tiny_t5

    tokenizer = _tokenizer_without_yes(["the cat sat on the mat ."] * 20)
    assert len(tokenizer("Yes", add_special_tokens=False)["input_ids"]) > 1
    folder = tmp_path_factory.mktemp("no-yes")
    build_tiny_t5(tokenizer, save_dir=folder)
    return folder


@pytest.mark.slow
def test_label_words_are_checked_before_the_first_step(no_yes_model, data_dir, tmp_path,
                                                       capsys):
    spec = get_profile("tiny", model=str(no_yes_model), max_steps=2)
    with pytest.raises(SpecError, match=r"label word 'Yes' as one token.*needed by "
                                        r"factuality_classification; checked before training"):
        finetune(spec, ["FAC", "COMP"], data_dir=data_dir, out_dir=tmp_path / "run")
    assert not (tmp_path / "run").exists()      # nothing written, no step taken
    # a task scored on text alone trains with that tokenizer
    finetune(dataclasses.replace(spec, max_steps=1), ["COMP"], data_dir=data_dir,
             out_dir=tmp_path / "comp")
    code, _, err = sumbench(capsys, "train", "--tasks", "FAC", "--profile", "tiny", "--model",
                            no_yes_model, "--data", data_dir, "--out", tmp_path / "cli",
                            "--max-steps", "2")
    errors = [line for line in err.splitlines() if "error" in line]
    assert code == 2 and len(errors) == 1 and errors[0].endswith("checked before training)")
    assert not (tmp_path / "cli" / "train_config.json").exists()


def test_a_tokenizer_larger_than_the_embedding_table_is_refused(usb_tokenizer):
    from trainers.models.tiny import build_tiny_t5

    model = build_tiny_t5(usb_tokenizer, vocab_size=len(usb_tokenizer) - 10)
    with pytest.raises(SpecError, match=f"the tokenizer has {len(usb_tokenizer)} tokens but "
                                        f"the model's embedding table only "
                                        f"{len(usb_tokenizer) - 10} rows"):
        check_before_training(model, usb_tokenizer, ["COMP"], 64, 16)


def test_budgets_beyond_absolute_positions_are_refused(usb_tokenizer):
    from transformers import BartConfig, BartForConditionalGeneration

    from trainers.models.tiny import build_tiny_t5

    bart = BartForConditionalGeneration(BartConfig(
        vocab_size=len(usb_tokenizer), d_model=16, encoder_layers=1, decoder_layers=1,
        encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=32,
        decoder_ffn_dim=32, max_position_embeddings=64))
    check_before_training(bart, usb_tokenizer, ["COMP"], 64, 16)
    with pytest.raises(SpecError, match="the training input budget is 128 tokens but the "
                                        "model has 64 positions"):
        check_before_training(bart, usb_tokenizer, ["COMP"], 128, 16)
    with pytest.raises(SpecError, match="the prediction input budget is 8192 tokens"):
        check_before_training(bart, usb_tokenizer, ["COMP"], 64, 16, (8192, 767))
    # T5's positions are relative: no budget is too long for it
    check_before_training(build_tiny_t5(usb_tokenizer), usb_tokenizer, ["COMP"], 8192, 768,
                          (8192, 767))


@pytest.mark.parametrize("amount, seconds, expected", [
    (64, 270, 0.237),          # Flan-T5-Large on a CPU: was logged as 0.0
    (123456, 10, 12350.0),
    (5, 0, 0.0),
])
def test_throughput_keeps_four_significant_digits(amount, seconds, expected):
    assert throughput(amount, seconds) == expected
