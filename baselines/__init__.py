"""The paper's n-gram baselines, all through lmbench.model.LanguageModel."""
