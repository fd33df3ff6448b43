"""Fidelity drift over time: baseline snapshots, their comparison, one key's history, change points."""
