"""Fine-tuning: specs and profiles, training data, the loop, checkpoints, LoRA,
process groups, validation signals and the checks before the first step."""
