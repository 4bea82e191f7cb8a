"""`python -m experiments.rec_ppo [overrides]`: recurrent PPO (LSTM or GRU), discrete or continuous."""

from stoix_like.entry import hydra_entry

main = hydra_entry("rec_ppo")

if __name__ == "__main__":
    main()
