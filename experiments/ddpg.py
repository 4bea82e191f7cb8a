"""`python -m experiments.ddpg [overrides]`: DDPG."""

from stoix_like.entry import hydra_entry
from stoix_like.systems import ddpg

main = hydra_entry("ddpg", ddpg.run_experiment)

if __name__ == "__main__":
    main()
