"""`python -m experiments.spo [overrides]`: SPO, Sequential Monte Carlo policy optimisation, a particle filter over
the env itself as the planner; discrete and continuous actions."""

from stoix_like.entry import hydra_entry

main = hydra_entry("spo")

if __name__ == "__main__":
    main()
