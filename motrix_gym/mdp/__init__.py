"""Reusable batched terms: pure torch functions of the runtime context, grouped by kind."""
