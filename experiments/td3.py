"""`python -m experiments.td3 [overrides]`: TD3."""

from stoix_like.entry import hydra_entry

main = hydra_entry("td3")

if __name__ == "__main__":
    main()
