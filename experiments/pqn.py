"""`python -m experiments.pqn [overrides]`: PQN, Q(λ) with LayerNorm and no replay buffer (discrete actions)."""

from stoix_like.entry import hydra_entry
from stoix_like.systems import pqn

main = hydra_entry("pqn", pqn.run_experiment)

if __name__ == "__main__":
    main()
