"""`python -m experiments.ppo_penalty [overrides]`: PPO with an adaptive KL penalty, discrete or continuous."""

from stoix_like.entry import hydra_entry

main = hydra_entry("ppo_penalty", "stoix_like.systems.on_policy.ppo_penalty:run_experiment")

if __name__ == "__main__":
    main()
