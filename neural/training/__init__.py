"""Training and loading networks: the entry point (train.py), the window and stream trainers, the epoch loop, the recipes, the one-process team."""
