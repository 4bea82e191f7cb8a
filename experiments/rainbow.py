"""`python -m experiments.rainbow [overrides]`: Rainbow, C51 by composition (see config/rainbow.yaml)."""

from stoix_like.entry import hydra_entry
from stoix_like.systems import distributional_dqn

main = hydra_entry("rainbow", distributional_dqn.run_experiment)

if __name__ == "__main__":
    main()
