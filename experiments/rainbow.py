"""`python -m experiments.rainbow [overrides]`: Rainbow, C51 by composition (see config/rainbow.yaml)."""

from stoix_like.entry import hydra_entry

main = hydra_entry("rainbow")

if __name__ == "__main__":
    main()
