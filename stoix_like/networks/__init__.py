"""flax.linen torsos, heads and distributions, composed by Hydra `_target_` entries in config/network/."""
