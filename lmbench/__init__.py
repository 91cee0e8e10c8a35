"""lmbench: Bengio et al. (2003) reproduced, n-gram baselines against the neural probabilistic LM.

`lmbench.load(path, row=None)` opens any model the suite saved, to score and sample text from Python
(`reports.api`, docs/api.md); it is imported when first read, so that `import lmbench` loads nothing of
the suite (this package is its ground floor) and no torch.
"""

__version__ = "0.1.0"


def __getattr__(name: str):
    if name == "load":
        from reports.api import load
        return load
    raise AttributeError(f"module 'lmbench' has no attribute {name!r}")
