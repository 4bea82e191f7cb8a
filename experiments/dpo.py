"""`python -m experiments.dpo [overrides]`: Discovered Policy Optimisation, discrete or continuous."""

from stoix_like.entry import hydra_entry

main = hydra_entry("dpo")

if __name__ == "__main__":
    main()
