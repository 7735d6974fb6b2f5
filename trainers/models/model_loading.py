"""What goes wrong when a model is loaded, said in one line.

`check_model_source` refuses a local-looking path that does not exist before transformers
mistakes it for a hub id (whose message then talks about repo ids or the network).
`load_failure` turns what `from_pretrained` raises on a missing, truncated or damaged file into
a SumbenchError naming the model, with the first line of the library's reason.
"""
from __future__ import annotations

import pickle
from pathlib import Path

from tasks.plumbing.errors import SumbenchError


def looks_local(name: str) -> bool:
    """Whether a model name is meant as a path: absolute, relative with ./ ../ ~, a file, or
    more than one '/' (a hub id is 'name' or 'owner/name')."""
    text = str(name)
    return (text.startswith(("/", ".", "~")) or text.count("/") > 1 or "\\" in text
            or Path(text).expanduser().exists())


def check_model_source(name: str, what: str = "model") -> None:
    """Raise a SumbenchError when `name` is meant as a local path and does not exist."""
    if name and looks_local(name) and not Path(str(name)).expanduser().exists():
        raise SumbenchError(f"{what} path {name} does not exist")


def load_errors() -> tuple[type[BaseException], ...]:
    """The exceptions `from_pretrained` raises for missing, truncated or damaged files."""
    errors: list[type[BaseException]] = [OSError, ValueError, RuntimeError, EOFError,
                                         pickle.UnpicklingError]
    try:
        from safetensors import SafetensorError
        errors.append(SafetensorError)
    except ImportError:  # pragma: no cover - safetensors comes with transformers
        pass
    return tuple(errors)


def local_folder_note(name: str, what: str = "model") -> str:
    """For 'owner/name' that is no local path while a folder 'owner' exists here (a typo of a
    local model, say `runs/my-modle`): a note saying so; "" otherwise."""
    text = str(name)
    owner = text.split("/")[0]
    if text.count("/") != 1 or Path(text).exists() or not Path(owner).is_dir():
        return ""
    return f"; nor is there a local {what} folder {text} (the folder {owner}/ exists)"


def load_failure(name: str, error: BaseException, what: str = "model") -> SumbenchError:
    """One-line SumbenchError for a model that could not be loaded."""
    reason = (str(error).strip().splitlines() or [type(error).__name__])[0]
    damaged = ("deserializ", "incomplete", "PytorchStreamReader", "unpickl", "truncated",
               "header", "corrupt")
    told = reason.replace(str(name), "")  # the model's own name may hold such a word
    if any(word.lower() in told.lower() for word in damaged):
        return SumbenchError(f"cannot load {what} {name}: a weights file is damaged or "
                             f"incomplete ({reason}); copy or save it again")
    return SumbenchError(f"cannot load {what} {name}: {reason}"
                         f"{local_folder_note(name, what)}")


def resolve_model_path(model: str) -> str:
    """An existing local model folder as an absolute path (a LoRA adapter records its base
    model's path, which must not depend on the working directory); hub ids unchanged."""
    if not model:
        return model
    path = Path(model).expanduser()
    return str(path.resolve()) if path.exists() else model


def load_seq2seq_safetensors(name: str, what: str = "model"):
    """(model, tokenizer) of a seq2seq model by folder or hub id that sumbench must not trust:
    weights from safetensors only, never unpickled (a pickle can run code); a one-line
    SumbenchError naming `what` otherwise. (Fine-tuning's start, the user's own checkpoint, is
    loaded by `trainers.finetuning.model_setup.load_finetuning_start`, which may unpickle.)"""
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    check_model_source(name, what)
    try:
        tokenizer = AutoTokenizer.from_pretrained(name)
        model = AutoModelForSeq2SeqLM.from_pretrained(name, use_safetensors=True)
    except load_errors() as error:
        raise load_failure(name, error, what) from None
    return model, tokenizer
