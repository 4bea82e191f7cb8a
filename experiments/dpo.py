"""`python -m experiments.dpo [overrides]`: Discovered Policy Optimisation, discrete or continuous."""

from stoix_like.entry import hydra_entry

main = hydra_entry("dpo", "stoix_like.systems.on_policy.dpo:run_experiment")

if __name__ == "__main__":
    main()
