"""`python -m experiments.awr [overrides]`: AWR on replayed sequences, discrete or continuous by the env's action space."""

from stoix_like.entry import hydra_entry

main = hydra_entry("awr", "stoix_like.systems.actor_critic.awr:run_experiment")

if __name__ == "__main__":
    main()
