"""`python -m experiments.r2d2 [overrides]`: R2D2, recurrent Q-learning from replayed sequences."""

from stoix_like.entry import hydra_entry

main = hydra_entry("r2d2")

if __name__ == "__main__":
    main()
