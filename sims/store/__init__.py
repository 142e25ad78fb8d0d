"""Results storage: tidy results with provenance (:mod:`.results`), the run store that
decides what is reused (:mod:`.runstore`), a run's code identity (:mod:`.identity`) and the
identity of the data it read (:mod:`.digest`), resumable runs' checkpoints
(:mod:`.checkpoint`) and the per-run locks (:mod:`.locks`)."""
