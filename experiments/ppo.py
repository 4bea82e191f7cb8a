"""`python -m experiments.ppo [overrides]`: PPO, discrete or continuous by the env's action space."""

from stoix_like.entry import hydra_entry
from stoix_like.systems import ppo

main = hydra_entry("ppo", ppo.run_experiment)

if __name__ == "__main__":
    main()
