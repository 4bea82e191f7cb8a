"""`python -m experiments.ppo [overrides]`: PPO, discrete or continuous by the env's action space."""

from stoix_like.entry import hydra_entry

main = hydra_entry("ppo")

if __name__ == "__main__":
    main()
