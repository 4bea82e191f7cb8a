"""`python -m experiments.az [overrides]`: AlphaZero, a tree search (mctx) whose model is the env itself."""

from stoix_like.entry import hydra_entry

main = hydra_entry("az")

if __name__ == "__main__":
    main()
