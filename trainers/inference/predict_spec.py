"""How a model is run for prediction (`PredictSpec`) and the Yes/No label rules it names.

Kept apart from trainers.inference.predict so that the generation and label-probability modules,
which
take a spec, do not import the runner that uses them.
"""
from __future__ import annotations

from dataclasses import dataclass

from tasks.plumbing.errors import SumbenchError
from tasks.plumbing.json_fields import JsonFields

DTYPES = ("float32", "bfloat16", "float16")
#: which generated steps give Yes/No probabilities (see trainers.inference.label_probs)
LABEL_RULES = ("official", "positional")
DEVICE_TYPES = ("cpu", "cuda", "mps", "xpu")
DEVICES = "auto, cpu, cuda, cuda:N, mps or xpu"


def device_index_ok(text: str) -> bool:
    """A device index as torch parses it: 0, or digits without a leading zero."""
    return text == "0" or (text.isascii() and text.isdigit() and text[0] != "0"
                           and len(text) < 10)


def is_device_name(name: object) -> bool:
    """Whether `name` names a prediction device: auto (a GPU when torch sees one), or cpu,
    cuda, mps or xpu with an optional :N. Checked without torch, before any model loads."""
    if not isinstance(name, str):
        return False
    kind, colon, index = name.partition(":")
    return name == "auto" or (kind in DEVICE_TYPES and (not colon or device_index_ok(index)))


@dataclass(frozen=True)
class PredictSpec(JsonFields):
    """How to run a model for prediction. Defaults follow the USB release's Flan-T5 scripts:
    inputs truncated at 8192 tokens, windowed tasks (EXT, EVEXT) cut into windows of 1024
    tokens (`window_tokens`), max_length 768 = 767 new tokens, greedy decoding for labels,
    outputs decoded with special tokens kept and the transformers-4 space clean-up. The
    release used 4 beams for text and span tasks (`num_beams=4`, the default) and greedy
    decoding for labels (`label_num_beams=1`). `task.format` gets `window_budget`:
    `window_tokens` (None: `max_input_tokens`) capped at `max_input_tokens`, so a window is
    never truncated during encoding (which would drop its last SENT markers). `batch_size`
    and `device` change results only by floating-point noise and are not part of a run's
    fingerprint."""
    json_indent = None  # one line: the spec is recorded in prediction files

    batch_size: int = 8
    max_input_tokens: int = 8192
    window_tokens: int | None = 1024
    max_new_tokens: int = 767
    num_beams: int = 4              # text and span tasks, as the release (predict_freeform/spans)
    label_num_beams: int = 1        # label tasks, greedy as the release (predict_classes)
    label_rule: str = "official"
    clean_up_tokenization_spaces: bool = True
    device: str = "auto"
    dtype: str = "float32"

    def __post_init__(self) -> None:
        for name in ("batch_size", "max_input_tokens", "window_tokens", "max_new_tokens",
                     "num_beams", "label_num_beams"):
            value = getattr(self, name)
            if name == "window_tokens" and value is None:
                continue
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise SumbenchError(f"PredictSpec.{name} must be a positive integer, got {value!r}")
        if self.label_rule not in LABEL_RULES:
            raise SumbenchError(f"PredictSpec.label_rule must be one of {LABEL_RULES}, "
                                f"got {self.label_rule!r}")
        if self.dtype not in DTYPES:
            raise SumbenchError(f"PredictSpec.dtype must be one of {DTYPES}, got {self.dtype!r}")

    @property
    def window_budget(self) -> int:
        """Tokens of one window of a windowed task: min(window_tokens, max_input_tokens)."""
        return min(self.window_tokens or self.max_input_tokens, self.max_input_tokens)

    def result_fields(self) -> dict:
        """The fields that can change predictions (what a resumed run must share)."""
        return {key: value for key, value in self.to_dict().items()
                if key not in ("batch_size", "device")}
