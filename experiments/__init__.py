"""Thin Hydra entry points, one per algorithm: `python -m experiments.<algo>`."""
