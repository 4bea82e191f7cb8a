"""`python -m experiments.td3 [overrides]`: TD3."""

from stoix_like.entry import hydra_entry
from stoix_like.systems import td3

main = hydra_entry("td3", td3.run_experiment)

if __name__ == "__main__":
    main()
