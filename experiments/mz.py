"""`python -m experiments.mz [overrides]`: MuZero, a tree search (mctx) whose model is learnt."""

from stoix_like.entry import hydra_entry

main = hydra_entry("mz")

if __name__ == "__main__":
    main()
