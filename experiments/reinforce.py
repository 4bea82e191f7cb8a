"""`python -m experiments.reinforce [overrides]`: REINFORCE with a learned baseline, discrete or continuous."""

from stoix_like.entry import hydra_entry

main = hydra_entry("reinforce")

if __name__ == "__main__":
    main()
