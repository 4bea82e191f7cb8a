"""`python -m experiments.awr [overrides]`: AWR on replayed sequences, discrete or continuous by the env's action space."""

from stoix_like.entry import hydra_entry

main = hydra_entry("awr")

if __name__ == "__main__":
    main()
