"""Stage 1, Request: the user's options validated into typed values (OptimizeRequest -> Problem, EstimateRequest)."""
