"""`python -m experiments.sac [overrides]`: SAC."""

from stoix_like.entry import hydra_entry

main = hydra_entry("sac", "stoix_like.systems.actor_critic.sac:run_experiment")

if __name__ == "__main__":
    main()
