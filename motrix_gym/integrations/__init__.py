"""Adapters to learners' own vector-env interfaces (each an optional extra)."""
