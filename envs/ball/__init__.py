"""Balancing on a free ball."""
