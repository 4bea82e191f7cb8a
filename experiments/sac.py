"""`python -m experiments.sac [overrides]`: SAC."""

from stoix_like.entry import hydra_entry
from stoix_like.systems import sac

main = hydra_entry("sac", sac.run_experiment)

if __name__ == "__main__":
    main()
