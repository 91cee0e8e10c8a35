"""Rebuilds the paper's perplexity tables (paper vs ours), checks its claims, draws the figures."""
