"""Stage 4, Metrics: the evaluator's breakdown turned into time, cost, memory, objectives and constraint values."""
