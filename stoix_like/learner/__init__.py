"""What a system's learner is built from: the contract every system meets (`system_contract`), exact step budgets
(`budget`), the evaluator, the replay buffer, observation normalisation, exploration schedules, the shared
optimiser (`optim`) and target networks (`target_networks`)."""
