"""The two seq2seq loading contracts on one folder whose weights are a pickle
(pytorch_model.bin): `load_seq2seq_safetensors` (models sumbench must not trust) refuses it in
one line, `load_finetuning_start` (the user's own start checkpoint) reads it, in float32."""
from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def pickled_folder(tmp_path_factory):
    """A tiny T5 and its tokenizer, the weights saved as pytorch_model.bin only."""
    import torch

    from trainers.models.tiny import build_tiny_t5, build_tiny_tokenizer

    folder = tmp_path_factory.mktemp("pickled-t5")
    tokenizer = build_tiny_tokenizer(["the cat sat on the mat"] * 20, vocab_size=300)
    model = build_tiny_t5(tokenizer, save_dir=folder, d_model=32)
    (folder / "model.safetensors").unlink()
    torch.save(model.state_dict(), folder / "pytorch_model.bin")
    return folder, model


def test_a_folder_sumbench_must_not_trust_is_never_unpickled(pickled_folder):
    from tasks.plumbing.errors import SumbenchError
    from trainers.models.model_loading import load_seq2seq_safetensors

    folder, _ = pickled_folder
    with pytest.raises(SumbenchError) as refused:
        load_seq2seq_safetensors(str(folder), "AMR generator")
    message = str(refused.value)
    assert message.startswith(f"cannot load AMR generator {folder}: ")
    assert "\n" not in message


def test_the_fine_tuning_start_reads_the_user_s_own_pickled_checkpoint(pickled_folder):
    import dataclasses

    import torch

    from trainers.finetuning.model_setup import load_finetuning_start
    from trainers.finetuning.profiles import get_profile

    folder, saved = pickled_folder
    spec = dataclasses.replace(get_profile("flan-t5-large"), model=str(folder))
    model, tokenizer, info = load_finetuning_start(spec)
    assert model.dtype == torch.float32
    assert torch.equal(model.shared.weight, saved.shared.weight)
    assert tokenizer("the cat")["input_ids"][-1] == tokenizer.eos_token_id
    assert (info["model"], info["class"], info["commit"]) == \
        (str(folder.resolve()), "T5ForConditionalGeneration", None)
    assert info["parameters"] == sum(p.numel() for p in saved.parameters())
