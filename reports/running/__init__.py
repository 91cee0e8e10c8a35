"""Running a comparison's rows: the pipeline, the work it hands to a row runner and a scheduler, the budget and the estimate of its time (docs/architecture.md)."""
