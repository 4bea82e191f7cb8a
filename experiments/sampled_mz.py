"""`python -m experiments.sampled_mz [overrides]`: Sampled MuZero, a tree search (mctx) in a learnt model over
actions drawn from a continuous policy."""

from stoix_like.entry import hydra_entry

main = hydra_entry("sampled_mz")

if __name__ == "__main__":
    main()
