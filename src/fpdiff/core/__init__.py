"""Precision, metrics, verdict rules, statuses and errors: what every other part speaks."""
