"""`python -m experiments.dqn [overrides]`: DQN."""

from stoix_like.entry import hydra_entry

main = hydra_entry("dqn", "stoix_like.systems.q_learning.dqn:run_experiment")

if __name__ == "__main__":
    main()
