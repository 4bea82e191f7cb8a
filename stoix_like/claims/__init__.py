"""Learning claims: the statistics of a population of seeds (`population`), what each algorithm's defaults must reach
(`learning_targets`) and training a population to check it (`learning_population`)."""
