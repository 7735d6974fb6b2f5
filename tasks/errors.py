"""The errors' old module name, kept one release: task plug-ins written before tasks/ had its
plumbing room import `tasks.errors`. The module is tasks.plumbing.errors."""
from __future__ import annotations

import warnings

from tasks.plumbing.errors import (  # noqa: F401 - what plug-ins import
    DataError,
    SumbenchError,
    UnknownNameError,
    did_you_mean,
    json_type,
    unknown_names,
)

warnings.warn("tasks.errors is renamed tasks.plumbing.errors; the old name goes in the next "
              "release", DeprecationWarning, stacklevel=2)
