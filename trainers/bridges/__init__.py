"""Bridges to other harnesses: USB tasks inside EleutherAI's lm-evaluation-harness."""
