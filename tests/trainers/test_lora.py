"""LoRA: the adapter is trained and saved on its own, and merging it changes no output."""
from __future__ import annotations

import dataclasses
import json

import pytest

from tasks.plumbing.io import read_jsonl
from trainers.finetuning.profiles import get_profile

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def trained_adapter(tmp_path_factory, data_dir):
    """(base folder, adapter folder, tokenizer) after a few LoRA steps on COMP."""
    from trainers.finetuning.finetune import finetune
    from trainers.models.tiny import build_tiny_t5, build_tiny_tokenizer

    texts = [" ".join(record["input_lines"])
             for record in read_jsonl(data_dir / "all/multisentence_compression/train.jsonl")]
    tokenizer = build_tiny_tokenizer(texts)
    base = tmp_path_factory.mktemp("lora-base").resolve()
    build_tiny_t5(tokenizer, save_dir=base)
    spec = get_profile("tiny", model=str(base), revision="v1", lora=True, learning_rate=2e-2,
                       max_steps=4, max_input_tokens=128, max_output_tokens=48)
    out = tmp_path_factory.mktemp("lora-run").resolve()
    adapter = finetune(spec, ["COMP"], data_dir=data_dir, out_dir=out)
    return base, adapter, tokenizer


def test_lora_defaults_for_t5():
    from trainers.finetuning.lora import lora_config

    spec = get_profile("flan-t5-large", lora=True)
    config = lora_config(spec)
    assert (config.r, config.lora_alpha, config.lora_dropout) == (16, 32, 0.05)
    assert set(config.target_modules) == {"q", "v"}
    assert config.task_type == "SEQ_2_SEQ_LM" and config.revision is None
    assert lora_config(get_profile("flan-t5-large", revision="abc123")).revision == "abc123"


@pytest.mark.slow
def test_lora_initialisation_is_seeded(trained_adapter):
    import torch
    from transformers import AutoModelForSeq2SeqLM

    from trainers.finetuning.lora import apply_lora

    base = trained_adapter[0]
    spec = get_profile("tiny", model=str(base), lora=True)
    state = torch.random.get_rng_state()

    def lora_a(seed):
        model = apply_lora(AutoModelForSeq2SeqLM.from_pretrained(str(base)),
                           dataclasses.replace(spec, seed=seed))
        return {n: p.detach().clone() for n, p in model.named_parameters() if "lora_A" in n}
    first, again, other = lora_a(0), lora_a(0), lora_a(1)
    assert torch.equal(state, torch.random.get_rng_state())
    assert len(first) == 12 and all(torch.equal(first[n], again[n]) for n in first)
    assert not any(torch.equal(first[n], other[n]) for n in first)


def test_adapter_is_saved_alone_with_trained_b_weights(trained_adapter):
    from safetensors.torch import load_file

    base, adapter, _ = trained_adapter
    assert adapter.name == "adapter"
    weights = load_file(str(adapter / "adapter_model.safetensors"))
    assert weights and all("lora_" in name for name in weights)
    # 2 encoder + 2 decoder blocks: q, v of self-attention, plus q, v of cross-attention
    assert len([name for name in weights if "lora_B" in name]) == 12
    assert all(float(w.abs().max()) > 0 for name, w in weights.items() if "lora_B" in name)
    config = json.loads((adapter / "adapter_config.json").read_text())
    assert config["base_model_name_or_path"] == str(base) and config["r"] == 4
    assert config["revision"] == "v1"                 # the base revision it was trained on
    assert (adapter / "tokenizer.json").exists()
    base_size = (base / "model.safetensors").stat().st_size
    assert (adapter / "adapter_model.safetensors").stat().st_size < base_size / 5


@pytest.mark.slow
def test_merged_model_matches_the_adapter_model(trained_adapter, data_dir, tmp_path):
    import torch
    from transformers import AutoModelForSeq2SeqLM

    from trainers.finetuning.lora import load_adapter_model, merge_lora

    base, adapter, tokenizer = trained_adapter
    merged_path = merge_lora(None, adapter, tmp_path / "merged")
    merged = AutoModelForSeq2SeqLM.from_pretrained(str(merged_path)).eval()
    unmerged = load_adapter_model(adapter).eval()
    plain = AutoModelForSeq2SeqLM.from_pretrained(str(base)).eval()
    records = read_jsonl(data_dir / "all/multisentence_compression/validation.jsonl")[:4]
    batch = tokenizer([" ".join(r["input_lines"]) for r in records], return_tensors="pt",
                      padding=True, truncation=True, max_length=128)
    decoder = torch.zeros((len(records), 6), dtype=torch.long)
    with torch.no_grad():
        logits = [model(**batch, decoder_input_ids=decoder).logits
                  for model in (merged, unmerged, plain)]
        generated = [model.generate(**batch, max_new_tokens=12, do_sample=False, num_beams=1)
                     for model in (merged, unmerged)]
    assert torch.allclose(logits[0], logits[1], atol=1e-5, rtol=1e-4)
    assert not torch.allclose(logits[0], logits[2], atol=1e-3)       # the adapter matters
    assert torch.equal(generated[0], generated[1])
    assert generated[0].shape[1] > 6                               # not just an early EOS
    assert (merged_path / "tokenizer.json").exists()
    assert not (merged_path / "adapter_config.json").exists()


def test_adapter_of_a_relative_base_path_loads_from_anywhere(trained_adapter, data_dir,
                                                              tmp_path, monkeypatch, capsys):
    from benchmark.commands.train import main
    from trainers.inference.predict import load_model

    base = trained_adapter[0]
    monkeypatch.chdir(base.parent)
    out = tmp_path / "run"
    assert main(["--profile", "tiny", "--model", base.name, "--revision", "v1", "--lora",
                 "--tasks", "COMP", "--data", str(data_dir), "--out", str(out),
                 "--max-steps", "1", "--early-stopping", "none"]) == 0
    assert capsys.readouterr().out.strip() == str(out / "adapter")
    config = json.loads((out / "adapter" / "adapter_config.json").read_text())
    assert (config["base_model_name_or_path"], config["revision"]) == (str(base), "v1")
    recorded = json.loads((out / "train_config.json").read_text())["config"]["model"]
    assert recorded["model"] == str(base)
    monkeypatch.chdir(tmp_path)                      # "<base.name>" means nothing here
    model, _, info = load_model(str(out / "adapter"))
    assert (info["model"], info["revision"]) == (str(base), "v1")
    assert info["adapter"] == str((out / "adapter").resolve())
