"""Velocity-tracking locomotion tasks."""
