"""`python -m experiments.ddpg [overrides]`: DDPG."""

from stoix_like.entry import hydra_entry

main = hydra_entry("ddpg", "stoix_like.systems.actor_critic.ddpg:run_experiment")

if __name__ == "__main__":
    main()
