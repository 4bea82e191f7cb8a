"""`python -m experiments.sampled_az [overrides]`: Sampled AlphaZero, a tree search (mctx) over actions drawn from a
continuous policy, whose model is the env itself."""

from stoix_like.entry import hydra_entry

main = hydra_entry("sampled_az")

if __name__ == "__main__":
    main()
