"""`python -m experiments.ddpg [overrides]`: DDPG."""

from stoix_like.entry import hydra_entry

main = hydra_entry("ddpg")

if __name__ == "__main__":
    main()
