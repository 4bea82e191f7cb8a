"""`python -m experiments.td3 [overrides]`: TD3."""

from stoix_like.entry import hydra_entry

main = hydra_entry("td3", "stoix_like.systems.actor_critic.td3:run_experiment")

if __name__ == "__main__":
    main()
