"""`python -m experiments.evaluate checkpoint=PATH`: return statistics of a saved policy, of any algorithm."""

from stoix_like.entry import hydra_entry

main = hydra_entry("evaluate", "stoix_like.run.evaluate_saved:evaluate_checkpoint")

if __name__ == "__main__":
    main()
