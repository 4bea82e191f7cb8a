"""parallel.scan_updates: an update batch of one runs unbatched (no vmap) and must mean what the vmapped batch means."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from stoix_like.runtime import parallel


def _update_step(state: jax.Array):
    mean_grad = parallel.pmean_batch_then_device(2.0 * state + 1.0)
    replicas = parallel.psum_batch_then_device(jnp.ones(()))
    return state - 0.25 * mean_grad, {"mean_grad": mean_grad, "replicas": replicas}


def test_an_update_batch_of_one_learns_what_a_batch_of_identical_slots_learns():
    learner = parallel.distribute(parallel.scan_updates(_update_step, 3))
    num_devices = jax.local_device_count()
    results = {}
    for update_batch_size in (1, 2):  # 1: the unbatched path; 2: the vmap over the "batch" axis
        state = jnp.broadcast_to(jnp.arange(3.0), (num_devices, update_batch_size, 3))
        final_state, outputs = jax.device_get(learner(state))
        assert final_state.shape == (num_devices, update_batch_size, 3)
        assert outputs["mean_grad"].shape == (num_devices, update_batch_size, 3, 3)  # (device, batch, update, ...)
        np.testing.assert_array_equal(outputs["replicas"], num_devices * update_batch_size)
        results[update_batch_size] = (final_state[:, 0], outputs["mean_grad"][:, 0])
    np.testing.assert_array_equal(results[1][0], results[2][0])
    np.testing.assert_array_equal(results[1][1], results[2][1])


def test_one_device_averages_without_an_all_reduce():
    """Over one device the device mean is the identity: the program must not keep an all-reduce for it (on the
    CPU each one is a rendezvous per gradient step), and the batch mean must still be taken."""
    grads = jnp.arange(6.0).reshape(1, 3, 2)  # (device, batch, ...)
    average = jax.pmap(jax.vmap(parallel.pmean_batch_then_device, axis_name=parallel.BATCH_AXIS),
                       axis_name=parallel.DEVICE_AXIS)
    assert "all-reduce" not in average.lower(grads).compile().as_text()
    np.testing.assert_allclose(average(grads), jnp.broadcast_to(grads.mean(axis=1, keepdims=True), grads.shape))
