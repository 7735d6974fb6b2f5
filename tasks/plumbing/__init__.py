"""Plumbing every task and command uses and that knows no task: errors that point at
the bad input, JSON(L) I/O, all-or-nothing writes, output-folder locks, chunk workers,
provenance, and tokenizers pinned to NLTK 3.8.1 without downloads."""
