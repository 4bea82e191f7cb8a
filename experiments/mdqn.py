"""`python -m experiments.mdqn [overrides]`: Munchausen DQN."""

from stoix_like.entry import hydra_entry

main = hydra_entry("mdqn")

if __name__ == "__main__":
    main()
