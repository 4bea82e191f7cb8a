"""`python -m experiments.dqn_reg [overrides]`: DQN-Reg."""

from stoix_like.entry import hydra_entry
from stoix_like.systems import dqn

main = hydra_entry("dqn_reg", dqn.run_experiment)

if __name__ == "__main__":
    main()
