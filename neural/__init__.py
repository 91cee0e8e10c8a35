"""The neural probabilistic language model of Bengio et al. (2003): network, training, adapter, CLI."""
