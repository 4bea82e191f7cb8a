"""MuZero (Schrittwieser et al., 2020) for single-agent JAX envs: a tree search whose model is learnt.

The network (networks/muzero.py) has three parts: representation (observation -> latent), dynamics (latent,
action -> next latent, reward) and prediction (latent -> policy, value); rewards and values live on a categorical
support in h-space (ops/value_support.py: trained on two-hot targets of h(x), read back as h⁻¹ of the expectation).

One update, on the off-policy skeleton (systems/off_policy.py):
  * **Acting.** Each env step is a search (mctx, `system.search_policy`, batched over the envs, inside the
    compiled learner) from the representation of the observation, expanding nodes with the learnt dynamics. Only
    the root knows which actions are legal (the observation's mask); interior nodes allow every action. The step is
    stored with the search's action weights and root value (`SearchedAction`).
  * **Replay.** Overlapping sequences of `unroll_steps + n_step + 1` stored steps, uniformly sampled from a
    flashbax trajectory buffer (as R2D2 replays sequences).
  * **Targets.** n-step returns from each step. With `system.bootstrap_from=network` (the default) they bootstrap
    from the current network's value of the true successor, recomputed at every gradient step (reanalyse of the
    value only); with `search`, as AlphaZero's do (`mcts.bootstrap_values`), from the search value stored with the
    next step while the episode goes on and the network's value at the true successor where it ended. Either way
    a truncation bootstraps and a termination's zero discount drops it. Along the K-step unroll
    (`unroll_targets`), a position past a termination is absorbing: its value and reward targets are 0 and its
    policy is not trained. Past a truncation the episode went on outside the sequence, so nothing is known there
    and nothing is trained.
  * **Loss.** Cross-entropy of the policy against the search's weights, and of the reward and value heads against
    two-hot targets, summed over the unroll; the dynamics' latent gradient is halved at every step (the paper's
    appendix G), so the unroll's gradient does not grow with K.
  * **Evaluation.** The prediction network's policy at the representation of the observation; greedy with
    `arch.evaluation_greedy`. With `system.evaluate_with_search` the search itself plays (it needs the observation
    only), as it acts in training.

Full reanalyse (recomputing the policy targets with fresh searches) is not built: the policy targets are the
searches acted with; only the value bootstrap is recomputed.
Continuous actions are refused, and so is a value support too small for the env's returns.

How the model meets the action space is a `SearchedActions`: MuZero's (`EVERY_ACTION`) searches every discrete
action with the policy's logits as its prior; Sampled MuZero (sampled_muzero.py) is this system with K continuous
actions drawn at every node, the dynamics fed the chosen draw, and the policy fitted to the search's weights over
the root's draws.
"""

from __future__ import annotations

from typing import Callable, Dict, NamedTuple, Optional, Tuple

import chex
import jax
import jax.numpy as jnp
import mctx
import optax
from omegaconf import DictConfig

from stoix_like.run import experiment
from stoix_like.runtime import host_keys, parallel
from stoix_like.learner import normalization, replay
from stoix_like.learner.budget import Budget
from stoix_like.runtime.compilation_cache import jitted_init
from stoix_like.envs.environment import ActionSpace, DiscreteActionSpace, Environment, example_observation
from stoix_like.errors import ConfigError
from stoix_like.learner.evaluator import actor_policy
from stoix_like.networks.distributions import MaskedCategorical
from stoix_like.networks.factory import build_muzero_network
from stoix_like.networks.muzero import MuZeroNetwork
from stoix_like.ops.losses import cross_entropy
from stoix_like.ops.masking import mask_illegal
from stoix_like.ops.returns import n_step_returns
from stoix_like.ops.value_support import (inverse_value_transform, scalar_to_two_hot, two_hot_to_scalar,
                                          value_transform)
from stoix_like.learner.optim import make_optimizer
from stoix_like.learner.system_contract import SystemSetup
from stoix_like.systems import off_policy
from stoix_like.systems.search import mcts
from stoix_like.types import Array, Observation, Params, PyTree


class SearchedAction(NamedTuple):
    """What MuZero stores of each step it acts: the action and what its search said."""

    action: Array  # [...] int32: the action taken (Sampled MuZero: [..., D], the chosen draw in [-1, 1])
    search_policy: PyTree  # [..., A] the search's action weights, the policy target (SearchedActions.policy_target)
    search_value: Array  # [...] the root's value after the search, the value targets' bootstrap
    statistics: Dict[str, Array]  # mcts.SEARCH_STATISTICS, [...] each: logged, never learnt from


class LatentEmbedding(NamedTuple):
    """A node of the learnt model's search: its latent, which search actions it allows (mcts.run_search reads it)
    and what they stand for."""

    latent: Array  # [D]
    action_mask: Array  # [A] bool: the observation's at the root, all legal below it
    actions: PyTree = ()  # [A, ...] what each search action stands for (Sampled MuZero's draws); () : the index itself


class SearchedActions(NamedTuple):
    """How the learnt model's search meets the action space: a node's search actions, what each feeds the dynamics
    and the env, what the policy learns from each search and its loss on that."""

    # expand(policy [B, ...] (the prediction's), value [B], legal [B, A] (the root's mask; None below it), key)
    expand: Callable[[PyTree, Array, Optional[Array], jax.Array], mcts.Expansion]
    model_action: mcts.EnvAction  # (a node's actions, search indices [B]) -> the dynamics' input actions [B, ...]
    env_action: mcts.EnvAction  # (a node's actions, search indices [B]) -> the env's actions [B, ...]
    # policy_target(root, search output) -> what the policy is fitted to at this step (stored with the step)
    policy_target: Callable[[mctx.RootFnOutput, mctx.PolicyOutput], PyTree]
    # policy_loss(policy [T, B, ...], targets [T, B, ...]) -> [T, B] the loss at each position
    policy_loss: Callable[[PyTree, PyTree], Array]
    # distribution(policy [B, ...], observation [B]) -> the policy as a distribution (the evaluator's)
    distribution: Callable[[PyTree, Observation], mcts.Policy]


def _every_action(logits: Array, value: Array, legal: Optional[Array], key: jax.Array) -> mcts.Expansion:
    del key  # every action is searched: nothing is drawn
    return mcts.Expansion(logits, value, jnp.ones(logits.shape, bool) if legal is None else legal, ())


# MuZero's: every discrete action at every node, the policy fitted to the search's weights over them
EVERY_ACTION = SearchedActions(
    expand=_every_action, model_action=mcts.index_is_action, env_action=mcts.index_is_action,
    policy_target=lambda root, output: output.action_weights,
    policy_loss=lambda logits, search_weights: cross_entropy(search_weights, logits),
    distribution=lambda logits, observation: MaskedCategorical(logits, observation.action_mask))


class UnrollTargets(NamedTuple):
    """The targets of a K-step unroll, time-major, and the weight of each term (1: trained, 0: not)."""

    value: Array  # [K + 1, B]
    value_weight: Array  # [K + 1, B]
    reward: Array  # [K, B]: the reward of step k, predicted by the dynamics from position k
    reward_weight: Array  # [K, B]
    policy: PyTree  # [K + 1, B, A] (SearchedActions.policy_target's, each leaf [K + 1, B, ...])
    policy_weight: Array  # [K + 1, B]


def support_of(system: DictConfig) -> Array:
    """`[num_atoms]` atoms spread evenly over [−support_max, support_max] in h-space."""
    top = float(system.support_max)
    return jnp.linspace(-top, top, int(system.num_atoms), dtype=jnp.float32)


def scalar_of(logits: Array, support: Array) -> Array:
    """`[..., K]` logits on the h-space support -> `[...]` the scalar they stand for, h⁻¹ of the expectation."""
    return inverse_value_transform(two_hot_to_scalar(jax.nn.softmax(logits, axis=-1), support))


def two_hot_of(scalars: Array, support: Array) -> Array:
    """`[...]` scalars -> `[..., K]` the two-hot distribution of h(scalar) on the support: a categorical target."""
    return scalar_to_two_hot(value_transform(scalars), support)


def check_support(system: DictConfig) -> None:
    """Refuses a support whose top, mapped back by h⁻¹, is below the largest discounted return the env can give,
    max_abs_reward / (1 − γ): targets beyond it would be clipped, and every value near it underestimated."""
    reach = float(inverse_value_transform(jnp.asarray(float(system.support_max))))
    largest_return = float(system.max_abs_reward) / (1.0 - float(system.gamma)) if system.gamma < 1 else float("inf")
    if reach < largest_return:
        raise ConfigError(
            f"system.support_max={system.support_max} reaches returns of ±{reach:.1f} (h⁻¹ of the support's top), "
            f"below system.max_abs_reward / (1 − system.gamma) = {system.max_abs_reward} / (1 − {system.gamma}) = "
            f"{largest_return:.1f}, the largest discounted return the env can give; raise system.support_max (a "
            f"support's top reaches h⁻¹(top) ≈ top²), or set system.max_abs_reward to the env's true reward bound.")


class Model(NamedTuple):
    """The network's three parts as functions of its params, batched over any leading axes:
    represent(params, observation) -> latent; dynamics(params, latent, action) -> (next latent, reward logits);
    predict(params, latent) -> (policy logits, value logits)."""

    # each returns what flax's `apply` does, typed loosely by flax (an output or (output, mutated state)): PyTree
    represent: Callable[[Params, Observation], PyTree]
    dynamics: Callable[[Params, Array, Array], PyTree]
    predict: Callable[[Params, Array], PyTree]


def model_of(network: MuZeroNetwork) -> Model:
    return Model(
        represent=lambda params, observation: network.apply(params, observation, method=MuZeroNetwork.represent),
        dynamics=lambda params, latent, action: network.apply(params, latent, action, method=MuZeroNetwork.dynamics),
        predict=lambda params, latent: network.apply(params, latent, method=MuZeroNetwork.predict),
    )


def learned_model(model: Model, support: Array, gamma: float, searched: SearchedActions = EVERY_ACTION
                  ) -> Callable:
    """mctx's `recurrent_fn(params, key, action [B], embedding) -> (RecurrentFnOutput, embedding)`: one step of the
    learnt dynamics, fed what search action `action` stands for at its node (`searched.model_action` of the node's
    own actions), and the prediction at the latent it reaches, expanded by `searched` (Sampled MuZero draws the new
    node's actions with mctx's key; the model itself is deterministic). The model does not predict episode ends
    (past one, training made it absorbing: zero reward and value), so every node's discount is γ; it knows no
    action masks, so every action is legal below the root."""

    def recurrent_fn(params: Params, key: jax.Array, action: Array, embedding: LatentEmbedding
                     ) -> Tuple[mctx.RecurrentFnOutput, LatentEmbedding]:
        latent, reward_logits = model.dynamics(params, embedding.latent, searched.model_action(embedding.actions,
                                                                                               action))
        policy, value_logits = model.predict(params, latent)
        reward, value = scalar_of(reward_logits, support), scalar_of(value_logits, support)
        node = searched.expand(policy, value, None, key)
        output = mctx.RecurrentFnOutput(reward=reward, discount=jnp.full_like(reward, gamma),
                                        prior_logits=mask_illegal(node.prior_logits, node.action_mask), value=value)
        return output, LatentEmbedding(latent, node.action_mask, node.actions)

    return recurrent_fn


def make_search(model: Model, support: Array, system: DictConfig, searched: SearchedActions = EVERY_ACTION
                ) -> Callable[[Params, Observation, jax.Array], Tuple[mctx.RootFnOutput, mctx.PolicyOutput]]:
    """`search(params, observations [B], key) -> (root, search output)`: a search from each observation's latent."""
    recurrent_fn = learned_model(model, support, float(system.gamma), searched)

    def search(params: Params, observation: Observation, key: jax.Array):
        latent = model.represent(params, observation)
        policy, value_logits = model.predict(params, latent)
        root_key = jax.random.fold_in(key, 0)  # the root's own draws (Sampled MuZero's); the search keeps `key`
        node = searched.expand(policy, scalar_of(value_logits, support), observation.action_mask, root_key)
        root = mctx.RootFnOutput(prior_logits=mask_illegal(node.prior_logits, node.action_mask), value=node.value,
                                 embedding=LatentEmbedding(latent, node.action_mask, node.actions))
        return root, mcts.run_search(str(system.search_policy), params, key, root, recurrent_fn,
                                     int(system.num_simulations), system.max_depth)

    return search


def make_act(model: Model, support: Array, system: DictConfig, searched: SearchedActions = EVERY_ACTION
             ) -> off_policy.ActFn:
    """A search from each observation's latent; the action the search chose, stored with what it said (the
    dynamics' input for the unroll, the policy's target)."""
    search = make_search(model, support, system, searched)

    def act(params: Params, observation: Observation, key: jax.Array, global_env_steps: jax.Array):
        del global_env_steps  # the search explores by itself: no schedule
        root, output = search(params, observation, key)
        actions = root.embedding.actions
        stored = SearchedAction(action=searched.model_action(actions, output.action),
                                search_policy=searched.policy_target(root, output),
                                search_value=mcts.search_value(output),
                                statistics=mcts.search_statistics(output, root.value))
        return stored, searched.env_action(actions, output.action)

    return act


def acting_metrics(acted: replay.Transition) -> Dict[str, Array]:
    """The rollout's searches, averaged (the statistics AlphaZero logs)."""
    return {name: jnp.mean(value) for name, value in acted.action.statistics.items()}


def unroll_targets(returns: Array, rewards: Array, discounts: Array, last: Array, search_policies: PyTree,
                   unroll_steps: int) -> UnrollTargets:
    """The targets of a K-step unroll from the first step of each sequence.

    Args (time-major, at least K + 1 rows; rows past K are not read):
      returns: `[T, B]` each step's value target (n-step returns).
      rewards, discounts, last: `[T, B]` each step's reward, env discount (0 on termination) and episode end.
      search_policies: `[T, B, A]` the search's action weights at each step (or any `SearchedActions.policy_target`,
        each leaf `[T, B, ...]`).
      unroll_steps: K.

    Position k (0..K) is the state after the first k actions. It lies in the sequence's first episode if no step
    before it ended one. Past a termination the state is absorbing: value and reward targets 0, trained, and its
    policy is not trained (no action there matters). Past a truncation the episode went on outside the sequence:
    nothing is known, so nothing is trained. The reward of step k is trained where position k is.
    """
    chex.assert_rank([returns, rewards, discounts, last], 2)
    chex.assert_tree_shape_prefix(search_policies, returns.shape)
    k = unroll_steps
    last = last[:k].astype(bool)
    ended_before = jnp.concatenate([jnp.zeros_like(last[:1]), jnp.cumsum(last, axis=0) > 0])  # [K + 1, B]
    # the first episode end in the sequence, where it is a termination
    terminated_first = last & (discounts[:k] == 0) & ~ended_before[:k]
    past_termination = jnp.concatenate([jnp.zeros_like(last[:1]), jnp.cumsum(terminated_first, axis=0) > 0])
    in_episode = ~ended_before
    trained = (in_episode | past_termination).astype(returns.dtype)
    return UnrollTargets(
        value=jnp.where(in_episode, returns[:k + 1], 0.0),
        value_weight=trained,
        reward=jnp.where(in_episode[:k], rewards[:k], 0.0),
        reward_weight=trained[:k],
        policy=jax.tree_util.tree_map(lambda target: target[:k + 1], search_policies),
        policy_weight=in_episode.astype(returns.dtype),
    )


def scale_gradient(x: Array, scale: float) -> Array:
    """x in the forward pass; its gradient multiplied by `scale` in the backward one."""
    return x * scale + jax.lax.stop_gradient(x) * (1.0 - scale)


def unroll(model: Model, params: Params, first_observation: Observation, actions: Array
           ) -> Tuple[PyTree, Array, Array]:
    """The model unrolled along `actions` `[K, B, ...]` from the representation of `first_observation` `[B, ...]`:
    the policy `[K + 1, B, ...]` (logits `[K + 1, B, A]`, or a tanh-Gaussian's parameters), value logits
    `[K + 1, B, S]` at every position, and reward logits `[K, B, S]` of every step."""

    def imagine_step(latent: Array, action: Array):
        policy_logits, value_logits = model.predict(params, latent)
        next_latent, reward_logits = model.dynamics(params, latent, action)
        return scale_gradient(next_latent, 0.5), (policy_logits, value_logits, reward_logits)

    last_latent, (policies, value_logits, reward_logits) = jax.lax.scan(
        imagine_step, model.represent(params, first_observation), actions)
    final_policy, final_value_logits = model.predict(params, last_latent)
    return (jax.tree_util.tree_map(lambda steps, final: jnp.concatenate([steps, final[None]]), policies, final_policy),
            jnp.concatenate([value_logits, final_value_logits[None]]), reward_logits)


def sequence_loss(model: Model, support: Array, system: DictConfig, searched: SearchedActions = EVERY_ACTION
                  ) -> Callable:
    """`loss(params, batch (L, B, ...)) -> (loss, metrics)` of a batch of replayed sequences."""
    k, n_step, gamma = int(system.unroll_steps), int(system.n_step), float(system.gamma)
    vf_coef = float(system.vf_coef)
    # "network": a reanalysed bootstrap, the value the network gives the successor now (truncation-correct, as
    # every successor is the true one); "search": the root value stored when the step was searched, stale by as
    # many updates as the step is old
    fresh_bootstraps = str(system.bootstrap_from) == "network"

    def network_value(params: Params, observation: Observation) -> Array:
        _, value_logits = model.predict(params, model.represent(params, observation))
        return scalar_of(value_logits, support)

    def loss(params: Params, batch: replay.Transition) -> Tuple[Array, Dict[str, Array]]:
        acted: SearchedAction = batch.action
        successor_values = jax.lax.stop_gradient(network_value(params, batch.next_observation))
        bootstraps = (successor_values if fresh_bootstraps
                      else mcts.bootstrap_values(acted.search_value, successor_values, batch.last))
        returns = n_step_returns(batch.reward, batch.discount, batch.last, bootstraps, n_step, gamma)
        targets = unroll_targets(returns, batch.reward, batch.discount, batch.last, acted.search_policy, k)
        policies, value_logits, reward_logits = unroll(
            model, params, jax.tree_util.tree_map(lambda x: x[0], batch.observation), acted.action[:k])

        def weighted(per_term: Array, weight: Array) -> Array:
            return jnp.mean(jnp.sum(per_term * weight, axis=0))  # summed over the unroll, averaged over sequences

        policy_loss = weighted(searched.policy_loss(policies, targets.policy), targets.policy_weight)
        value_loss = weighted(cross_entropy(two_hot_of(targets.value, support), value_logits), targets.value_weight)
        reward_loss = weighted(cross_entropy(two_hot_of(targets.reward, support), reward_logits),
                               targets.reward_weight)
        total = policy_loss + vf_coef * value_loss + reward_loss
        return total, {"policy_loss": policy_loss, "value_loss": value_loss, "reward_loss": reward_loss,
                       "value_target": jnp.mean(targets.value[0])}

    return loss


def make_learn_from_batch(loss: Callable, update: Callable) -> off_policy.LearnFromBatch:
    """One gradient step on a batch of sequences, averaged over the update batch and the devices."""

    def learn_from_batch(params, opt_state, batch: replay.Transition, weights, key, update_count):
        del weights, key, update_count  # uniform replay, a deterministic loss, no target network
        grads, metrics = jax.grad(loss, has_aux=True)(params, batch)
        grads, metrics = parallel.pmean_batch_then_device((grads, metrics))
        updates, opt_state = update(grads, opt_state, params)
        priorities = jnp.zeros(batch.reward.shape[1:], jnp.float32)  # not prioritised: unused
        return off_policy.BatchUpdate(optax.apply_updates(params, updates), opt_state, metrics, priorities)

    return learn_from_batch


def sequence_batches(system: DictConfig) -> replay.BatchView:
    """Overlapping sequences of K + n_step + 1 steps, time-major: the unroll's K + 1 positions with the n rewards
    and the bootstrap each of their targets reads."""
    length = int(system.unroll_steps) + int(system.n_step) + 1
    return replay.BatchView("system.unroll_steps + system.n_step + 1", length, replay.time_major,
                            steps_per_item=length)


def prediction_policy(model: Model, greedy: bool, searched: SearchedActions = EVERY_ACTION):
    """The eval policy: the prediction network's policy at the observation's latent; eval params
    `(params, obs_norm)`."""

    def policy_distribution(params: Params, observation: Observation) -> mcts.Policy:
        policy, _ = model.predict(params, model.represent(params, observation))
        return searched.distribution(policy, observation)

    return actor_policy(policy_distribution, greedy)


def searching_policy(model: Model, support: Array, system: DictConfig, greedy: bool,
                     searched: SearchedActions = EVERY_ACTION):
    """The eval policy with `system.evaluate_with_search`: the search acting sees observations only, so it plays as
    it acted in training; greedy, the search action of highest weight (else the one the search chose). Eval params
    `(params, obs_norm)`."""
    search = make_search(model, support, system, searched)

    def policy(eval_params: Tuple[Params, PyTree], observation: Observation, key: jax.Array) -> Array:
        params, obs_norm = eval_params
        root, output = search(params, normalization.normalize(obs_norm, observation), key)
        index = jnp.argmax(output.action_weights, axis=-1) if greedy else output.action
        return searched.env_action(root.embedding.actions, index)

    return policy


def example_action(action_space: ActionSpace) -> Array:
    """One action `[1, ...]` of the kind the dynamics reads (what `init` traces)."""
    if isinstance(action_space, DiscreteActionSpace):
        return jnp.zeros((1,), jnp.int32)
    return jnp.zeros((1, action_space.action_dim), jnp.float32)


def make_system_setup(env: Environment, key: jax.Array, config: DictConfig, budget: Budget, action_space: ActionSpace,
           searched: SearchedActions = EVERY_ACTION) -> SystemSetup:
    """A learnt-model search system's `learner_setup` once its action space is checked: the support (refused where
    too small for the env's returns), the model, and the off-policy learner that searches with `searched`."""
    system = config.system
    check_support(system)
    support = support_of(system)
    network = build_muzero_network(config.network, action_space, int(system.num_atoms))
    init_key, key = host_keys.split(key)
    params = jitted_init(network)(init_key, example_observation(env), example_action(action_space))
    optimizer = make_optimizer(system.model_lr, system.max_grad_norm,
                               budget.num_updates * int(system.gradient_steps_per_update), system.decay_learning_rates)
    model = model_of(network)
    return off_policy.make_system_setup(
        env, key, config, budget,
        params=params, opt_states=optimizer.init(params),
        act=make_act(model, support, system, searched),
        learn_from_batch=make_learn_from_batch(sequence_loss(model, support, system, searched), optimizer.update),
        batches=sequence_batches(system),
        eval_policy=(searching_policy(model, support, system, bool(config.arch.evaluation_greedy), searched)
                     if system.evaluate_with_search else
                     prediction_policy(model, greedy=bool(config.arch.evaluation_greedy), searched=searched)),
        eval_params=lambda slot: (slot.params, slot.obs_norm),
        acting_metrics=acting_metrics,
    )


def learner_setup(env: Environment, key: jax.Array, config: DictConfig, budget: Budget) -> SystemSetup:
    return make_system_setup(env, key, config, budget, mcts.require_discrete_actions(env, config))


def run_experiment(config: DictConfig) -> float:
    return experiment.run(config, learner_setup, algorithm=str(config.system.system_name))
