"""stoix_like's Hydra plugins: an Optuna sweeper whose study can live in a database that several jobs share
(`optuna_study`), and a Ray launcher (`ray_launcher`).

Hydra finds plugins only inside the `hydra_plugins` namespace package, and imports every module there on each
start: these modules import optuna and ray only when a sweep or launch uses them. Their configs are stored under
the names users type (`hydra/sweeper=optuna`, `hydra/launcher=ray`) by
`stoix_like.config.compose.register_plugin_defaults`.
"""
