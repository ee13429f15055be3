"""Batch retrieval operators: every function takes all queries of a batch at once."""
