"""The eight USB tasks; importing this package registers them in tasks.plumbing.registry.TASKS."""
from __future__ import annotations

from tasks.usb import (  # noqa: F401
                       abstractive,
                       compression,
                       evidence,
                       extractive,
                       factuality,
                       fixing,
                       topic,
                       unsupported,
)
