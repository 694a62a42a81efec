"""Collecting answers and judgments from model providers (and the simulated provider used for demos and tests)."""
