"""Whole-body motion tracking tasks."""
