"""`python -m experiments.ddqn [overrides]`: Double DQN."""

from stoix_like.entry import hydra_entry
from stoix_like.systems import dqn

main = hydra_entry("ddqn", dqn.run_experiment)

if __name__ == "__main__":
    main()
