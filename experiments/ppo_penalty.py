"""`python -m experiments.ppo_penalty [overrides]`: PPO with an adaptive KL penalty, discrete or continuous."""

from stoix_like.entry import hydra_entry

main = hydra_entry("ppo_penalty")

if __name__ == "__main__":
    main()
