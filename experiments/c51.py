"""`python -m experiments.c51 [overrides]`: C51."""

from stoix_like.entry import hydra_entry
from stoix_like.systems import distributional_dqn

main = hydra_entry("c51", distributional_dqn.run_experiment)

if __name__ == "__main__":
    main()
