"""The JAX runtime under every run: devices, axes and processes (`parallel`), PRNG keys computed on the host
(`host_keys`), the CPU lowering of jax's PRNG hash (`threefry_lowering`), the persistent compilation cache
(`compilation_cache`), CPU thread pools (`cpu_threads`) and imports deferred until first use (`deferred_imports`)."""
