"""The network families, one file each (registered in neural/families.py)."""
