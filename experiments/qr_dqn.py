"""`python -m experiments.qr_dqn [overrides]`: QR-DQN."""

from stoix_like.entry import hydra_entry

main = hydra_entry("qr_dqn")

if __name__ == "__main__":
    main()
