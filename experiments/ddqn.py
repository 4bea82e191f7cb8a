"""`python -m experiments.ddqn [overrides]`: Double DQN."""

from stoix_like.entry import hydra_entry

main = hydra_entry("ddqn")

if __name__ == "__main__":
    main()
