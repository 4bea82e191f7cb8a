"""One module per algorithm; each holds only what is particular to that algorithm."""
