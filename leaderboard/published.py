"""Published reference numbers of the USB paper, shown as "published — not reproduced".

Krishna et al. (2023), "USB: A Unified Summarization Benchmark Across Tasks and Domains",
test results on the consolidated `all` split (shared/docs/seeds-digest.md): headlines x100 in
the paper's order COMP / EVEXT / EXT / FAC / FIX / ABS / TOPIC / UNSUP.
"""
from __future__ import annotations

PUBLISHED_BADGE = "published — not reproduced"
SOURCE = "Krishna et al. (2023), USB paper, test results on the `all` split"
#: the paper's column order, as canonical task names
PAPER_ORDER = ("multisentence_compression", "evidence_extraction", "extractive_summarization",
               "factuality_classification", "fixing_factuality", "abstractive_summarization",
               "topicbased_summarization", "unsupported_span_prediction")
_ROWS = (
    ("Flan-T5-Large", "fine-tuned per task",
     (43.23, 77.71, 87.99, 95.15, 32.94, 32.05, 23.62, 58.57)),
    ("Flan-T5-XL", "fine-tuned per task",
     (44.87, 79.23, 87.81, 95.30, 35.10, 32.69, 24.26, 64.94)),
    ("Flan-T5-XL multitask", "fine-tuned on all tasks together",
     (44.32, 76.64, 86.44, 95.38, 36.71, 31.83, 23.46, 58.51)),
    ("GPT-3.5-turbo", "few-shot",
     (33.21, 26.78, 61.63, 60.81, 3.29, 29.77, 14.59, 7.80)),
)


def published_usb_rows() -> list[dict]:
    """The paper's rows: model, method, variant, headlines per task, source, badge."""
    return [{"model": model, "method": method, "variant": "all",
             "headlines": dict(zip(PAPER_ORDER, values)), "source": SOURCE,
             "badge": PUBLISHED_BADGE} for model, method, values in _ROWS]
