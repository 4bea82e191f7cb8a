"""`python -m experiments.qr_dqn [overrides]`: QR-DQN."""

from stoix_like.entry import hydra_entry

main = hydra_entry("qr_dqn", "stoix_like.systems.q_learning.distributional_dqn:run_experiment")

if __name__ == "__main__":
    main()
