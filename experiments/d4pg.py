"""`python -m experiments.d4pg [overrides]`: D4PG."""

from stoix_like.entry import hydra_entry
from stoix_like.systems import d4pg

main = hydra_entry("d4pg", d4pg.run_experiment)

if __name__ == "__main__":
    main()
