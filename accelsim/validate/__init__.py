"""Validation against real machines: cases, their measurement on the host or a GPU, and scoring against the model."""
