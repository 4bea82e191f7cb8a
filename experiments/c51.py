"""`python -m experiments.c51 [overrides]`: C51."""

from stoix_like.entry import hydra_entry

main = hydra_entry("c51")

if __name__ == "__main__":
    main()
