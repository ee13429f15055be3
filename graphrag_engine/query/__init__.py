"""The query runtime: the runner (batches, checkpoints, answers, the run folder), the Ray
runner, answers of several methods in one batched call, and the forecasts of `--dry-run`;
the methods it runs live in graphrag_engine/methods/."""
