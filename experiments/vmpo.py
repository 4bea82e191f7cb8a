"""`python -m experiments.vmpo [overrides]`: V-MPO, discrete or continuous by the env's action space."""

from stoix_like.entry import hydra_entry

main = hydra_entry("vmpo")

if __name__ == "__main__":
    main()
