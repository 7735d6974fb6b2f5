"""Few-shot prompting: shot selection, prompt styles, generation backends (Hugging Face,
OpenAI-compatible chat and completions), output parsers and the release's GPT-3.5 protocol."""
