"""Evaluation: question loaders, metrics, LLM judge and reports."""
