"""`python -m experiments.d4pg [overrides]`: D4PG."""

from stoix_like.entry import hydra_entry

main = hydra_entry("d4pg")

if __name__ == "__main__":
    main()
