"""`python -m experiments.reinforce [overrides]`: REINFORCE with a learned baseline, discrete or continuous."""

from stoix_like.entry import hydra_entry

main = hydra_entry("reinforce", "stoix_like.systems.on_policy.reinforce:run_experiment")

if __name__ == "__main__":
    main()
