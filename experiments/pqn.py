"""`python -m experiments.pqn [overrides]`: PQN, Q(λ) with LayerNorm and no replay buffer (discrete actions)."""

from stoix_like.entry import hydra_entry

main = hydra_entry("pqn")

if __name__ == "__main__":
    main()
