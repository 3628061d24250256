"""Stage 5, Search: Optuna ask/tell in batches, refinement, the exhaustive certificate, shared studies."""
