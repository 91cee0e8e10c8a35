"""Interpolation of language models' per-token probabilities (Bengio et al. 2003, section 4)."""
