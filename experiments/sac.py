"""`python -m experiments.sac [overrides]`: SAC."""

from stoix_like.entry import hydra_entry

main = hydra_entry("sac")

if __name__ == "__main__":
    main()
