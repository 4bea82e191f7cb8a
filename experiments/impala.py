"""`python -m experiments.impala [overrides]`: IMPALA (V-trace), on Sebulba's actor threads by default."""

from stoix_like.entry import hydra_entry

main = hydra_entry("impala")

if __name__ == "__main__":
    main()
