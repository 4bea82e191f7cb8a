"""`python -m experiments.dqn_reg [overrides]`: DQN-Reg."""

from stoix_like.entry import hydra_entry

main = hydra_entry("dqn_reg")

if __name__ == "__main__":
    main()
