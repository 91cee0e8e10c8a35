"""lmbench: Bengio et al. (2003) reproduced, n-gram baselines against the neural probabilistic LM."""

__version__ = "0.1.0"
