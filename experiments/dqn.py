"""`python -m experiments.dqn [overrides]`: DQN."""

from stoix_like.entry import hydra_entry

main = hydra_entry("dqn")

if __name__ == "__main__":
    main()
