"""`python -m experiments.qr_dqn [overrides]`: QR-DQN."""

from stoix_like.entry import hydra_entry
from stoix_like.systems import distributional_dqn

main = hydra_entry("qr_dqn", distributional_dqn.run_experiment)

if __name__ == "__main__":
    main()
