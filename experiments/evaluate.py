"""`python -m experiments.evaluate checkpoint=PATH`: return statistics of a saved policy, of any algorithm."""

from stoix_like.entry import hydra_entry
from stoix_like.experiment import evaluate_checkpoint

main = hydra_entry("evaluate", evaluate_checkpoint)

if __name__ == "__main__":
    main()
