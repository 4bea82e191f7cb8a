"""One run from config to logs: the Anakin loop (`experiment`), what both loops share (`shared`), the Sebulba loop
(`sebulba/`), evaluating a saved run (`evaluate_saved`), checkpoints (`checkpointing/`), logging and the run record
(`run_record`, the run.json a report reads)."""
