"""What the search systems share: DeepMind's mctx, glued to this library's envs, networks and masks.

  * `env_model`: mctx's `recurrent_fn` for a search whose model is the environment itself. JAX envs are pure,
    so an env state is a search state: expanding a node steps a copy of the env, exactly as `env.step` would.
  * `Expansion`: what the network says at a node, the search's actions included. AlphaZero's actions are the
    env's own (`index_is_action`); Sampled AlphaZero's are K continuous actions drawn at each node, which the
    node's embedding carries (`EnvEmbedding.actions`) and its `env_action` maps a search index to.
  * `network_root`: the root from the network at the current observation.
  * `run_search`: the search policy chosen by `system.search_policy` (`gumbel_muzero` or `muzero`), with illegal
    actions (`Observation.action_mask`) excluded at the root and at every interior node.
  * `search_statistics`: what is logged of every search (visit entropy, search value minus network value,
    tree depth).
  * `bootstrap_values`: what each step's value target bootstraps from, truncation-correct.

A learned model (MuZero, search/muzero.py) supplies its own `recurrent_fn` and embedding; the policy choice, the
masking, the statistics and the bootstraps are these.
"""

from __future__ import annotations

from typing import Callable, Dict, NamedTuple, NoReturn, Tuple, Union

import chex
import jax
import jax.numpy as jnp
import mctx
from omegaconf import DictConfig

from stoix_like.envs.environment import ContinuousActionSpace, DiscreteActionSpace, Environment
from stoix_like.envs.wrappers import VmapWrapper
from stoix_like.errors import ConfigError
from stoix_like.networks.distributions import MaskedCategorical, TanhGaussian
from stoix_like.ops.masking import mask_illegal
from stoix_like.types import Array, EnvState, Observation, PyTree, TimeStep

# system.search_policy -> the mctx policy it runs
SEARCH_POLICIES = ("gumbel_muzero", "muzero")
# the keys of `search_statistics`, logged by every search system
SEARCH_STATISTICS = ("visit_entropy", "search_value_minus_network_value", "tree_depth")
# a policy network's action distribution: a categorical over discrete actions, a tanh-Gaussian over continuous ones
Policy = Union[MaskedCategorical, TanhGaussian]


class Expansion(NamedTuple):
    """What the network says at a batch of nodes `[B]`, for the search's A actions."""

    prior_logits: Array  # [B, A], unmasked (the search masks them with `action_mask`)
    value: Array  # [B]
    action_mask: Array  # [B, A] bool: the search actions that may be taken from the node
    actions: PyTree  # [B, A, ...] what each search action stands for (Sampled AlphaZero's draws); () : the index itself


# expand(search params, key, observations [B, ...]) -> Expansion
Expand = Callable[[PyTree, jax.Array, Observation], Expansion]
# env_action(a node's actions [B, A, ...] (or ()), search actions [B]) -> the env's actions [B, ...]
EnvAction = Callable[[PyTree, Array], Array]


def index_is_action(actions: PyTree, index: Array) -> Array:
    """`EnvAction` of a search over the env's own actions: the search's index is the env's action."""
    del actions
    return index


class EnvEmbedding(NamedTuple):
    """A search node of the env-as-model search: the env state, which search actions are legal from it, and what
    they stand for."""

    env_state: EnvState
    action_mask: Array  # [A] bool: which search actions the node's children may take
    actions: PyTree = ()  # [A, ...] the env action each search action stands for (sampled at the node); () : itself


def network_root(expand: Expand, params: PyTree, key: jax.Array, env_state: EnvState, timestep: TimeStep
                 ) -> mctx.RootFnOutput:
    """The root of a batch of searches `[B]`: the network's expansion at the current observations, the env
    states as embeddings."""
    node = expand(params, key, timestep.observation)
    return mctx.RootFnOutput(prior_logits=mask_illegal(node.prior_logits, node.action_mask), value=node.value,
                             embedding=EnvEmbedding(env_state, node.action_mask, node.actions))


def successor_observation(timestep: TimeStep) -> Observation:
    """`[B]` the observation a step's value is taken at: the true successor (`extras["next_obs"]`) where the episode
    ended, whose value is a truncation's bootstrap (a termination's zero discount drops it), and elsewhere the
    observation the env continues from. Its action mask is the continuing observation's."""
    ended = timestep.last()
    evaluated = jax.tree_util.tree_map(lambda successor, continued: jnp.where(
        ended.reshape(ended.shape + (1,) * (successor.ndim - 1)), successor, continued),
        timestep.extras["next_obs"], timestep.observation)
    return evaluated._replace(action_mask=timestep.observation.action_mask)


def env_model(env: Environment, expand: Expand, gamma: float, env_action: EnvAction = index_is_action
              ) -> Callable:
    """mctx's `recurrent_fn(params, key, action [B], embedding) -> (RecurrentFnOutput, embedding)`, stepping
    `env` (one unbatched env with auto-reset, the train env) on a batch of embeddings, with the env action
    `env_action` says each search action stands for at its node.

    The step's keys travel in the env state, so the search sees the very transitions the real env would make.
    Where an episode ends the node's discount is 0, so nothing below it (the auto-reset's next episode) reaches
    its parent: a termination adds nothing more, and a truncation adds γ·V of the true successor
    (`extras["next_obs"]`) to the reward, the bootstrap every return here takes at a time limit. One network
    pass serves both: where the episode ended it evaluates the true successor, whose value is that bootstrap
    (and whose prior no selection ever reads past a zero discount); elsewhere the observation the node continues
    from. mctx's key serves the expansion (Sampled AlphaZero draws the new node's actions with it).
    """
    batched_env = VmapWrapper(env)

    def recurrent_fn(params: PyTree, key: jax.Array, action: Array, embedding: EnvEmbedding
                     ) -> Tuple[mctx.RecurrentFnOutput, EnvEmbedding]:
        env_state, timestep = batched_env.step(embedding.env_state, env_action(embedding.actions, action))
        ended = timestep.last()
        evaluated = successor_observation(timestep)
        node = expand(params, key, evaluated)
        discount = gamma * timestep.discount  # 0 on termination: a terminal state's value is 0
        output = mctx.RecurrentFnOutput(
            reward=timestep.reward + jnp.where(ended, discount * node.value, 0.0),
            discount=jnp.where(ended, 0.0, discount),
            prior_logits=mask_illegal(node.prior_logits, node.action_mask),
            value=node.value,
        )
        return output, EnvEmbedding(env_state, node.action_mask, node.actions)

    return recurrent_fn


def _legal_actions_only(qtransform: Callable) -> Callable:
    """A q-transform whose illegal actions (by the node's embedding mask) score ILLEGAL_ACTION_VALUE.

    mctx masks illegal actions at the root only; MuZero's PUCT would otherwise pick an unvisited illegal action
    whose completed value beats the visited ones, and step the env with it.
    """

    def masked_qtransform(tree: mctx.Tree, node_index: Array) -> Array:
        return mask_illegal(qtransform(tree, node_index), tree.embeddings.action_mask[node_index])

    return masked_qtransform


def run_search(search_policy: str, params: PyTree, key: jax.Array, root: mctx.RootFnOutput, recurrent_fn: Callable,
               num_simulations: int, max_depth: int | None) -> mctx.PolicyOutput:
    """One batch of searches `[B]` from `root` with the mctx policy `search_policy` (SEARCH_POLICIES).

    `gumbel_muzero`: Gumbel MuZero (Danihelka et al., 2022), an improving policy even with few simulations; its
    action weights are the improved policy softmax(logits + completed Q). `muzero`: PUCT with Dirichlet noise at
    the root; its action weights are the root's visit counts, normalised. The root's embedding must be an
    `EnvEmbedding` or carry `action_mask` likewise.
    """
    invalid_actions = 1.0 - root.embedding.action_mask.astype(root.prior_logits.dtype)
    common = dict(params=params, rng_key=key, root=root, recurrent_fn=recurrent_fn, num_simulations=num_simulations,
                  invalid_actions=invalid_actions, max_depth=max_depth)
    if search_policy == "gumbel_muzero":
        return mctx.gumbel_muzero_policy(
            **common, qtransform=_legal_actions_only(mctx.qtransform_completed_by_mix_value))
    if search_policy == "muzero":
        return mctx.muzero_policy(**common, qtransform=_legal_actions_only(mctx.qtransform_by_parent_and_siblings))
    raise ValueError(f"unknown search policy {search_policy!r}; choose one of {', '.join(SEARCH_POLICIES)}")


def node_depths(tree: mctx.Tree) -> Array:
    """`[B, N]` each node's depth, the root's 0; a node never created (a simulation that stopped at max_depth
    revisits one) has depth 0 too.

    mctx creates node i at simulation i, always below an earlier node, so one pass in index order suffices.
    """
    parents = tree.parents

    def set_depth(index: int, depths: Array) -> Array:
        parent = parents[:, index]
        parent_depth = jnp.take_along_axis(depths, jnp.maximum(parent, 0)[:, None], axis=1)[:, 0]
        return depths.at[:, index].set(jnp.where(parent >= 0, parent_depth + 1, 0))

    return jax.lax.fori_loop(1, parents.shape[1], set_depth, jnp.zeros(parents.shape, jnp.int32))


def search_statistics(output: mctx.PolicyOutput, network_value: Array) -> Dict[str, Array]:
    """`[B]` per search: the entropy of the root's visit distribution (0: every simulation went one way), the
    search's root value minus the network's (how much the search revised it), and the tree's depth (its deepest
    node)."""
    summary = output.search_tree.summary()
    chex.assert_equal_shape([summary.value, network_value])
    probs = summary.visit_probs
    visit_entropy = -jnp.sum(jnp.where(probs > 0, probs * jnp.log(jnp.where(probs > 0, probs, 1.0)), 0.0), axis=-1)
    return {"visit_entropy": visit_entropy,
            "search_value_minus_network_value": summary.value - network_value,
            "tree_depth": jnp.max(node_depths(output.search_tree), axis=-1).astype(network_value.dtype)}


def search_value(output: mctx.PolicyOutput) -> Array:
    """`[B]` the root's value after the search: the network's value averaged with every simulation's return."""
    return output.search_tree.summary().value


def bootstrap_values(search_values: Array, successor_values: Array, done: Array) -> Array:
    """`[T, B]` the value each step's return bootstraps from: the search's value of the next row where the
    episode goes on, and the network's value at the true successor (`next_observation`) where it ended and after
    the last row. At a truncation that is the right bootstrap; at a termination the env's zero discount drops it.
    (After the last row, one more search would compile a second search into the learner for one bootstrap.)

    All three `[T, B]`: the search values acted with, the network's values of each step's true successor, and
    whether the episode ended at each step (terminated or truncated).
    """
    chex.assert_equal_shape([search_values, successor_values, done])
    next_search_values = jnp.concatenate([search_values[1:], successor_values[-1:]])
    return jnp.where(done, successor_values, next_search_values)


def _refuse_action_kind(config: DictConfig, has: str, searches: str, instead: str) -> NoReturn:
    raise ConfigError(f"{config.env.scenario.name} has {has} actions; {config.system.system_name} searches over "
                      f"{searches} ones ({instead}).")


def require_discrete_actions(env: Environment, config: DictConfig) -> DiscreteActionSpace:
    """`env`'s action space; an env with continuous actions is refused in one line (plain AlphaZero and MuZero
    search over discrete ones)."""
    action_space = env.action_space
    if not isinstance(action_space, DiscreteActionSpace):
        _refuse_action_kind(config, "continuous", "discrete", "choose a discrete-action env, e.g. env=gymnax/cartpole")
    return action_space


def require_continuous_actions(env: Environment, config: DictConfig, plain: str = "AlphaZero", plain_entry: str = "az"
                               ) -> ContinuousActionSpace:
    """`env`'s action space; an env with discrete actions is refused in one line (the sampled systems draw from a
    continuous policy; their plain variant, `plain` run by `experiments.<plain_entry>`, searches every discrete
    action)."""
    action_space = env.action_space
    if not isinstance(action_space, ContinuousActionSpace):
        _refuse_action_kind(config, "discrete", "sampled continuous",
                            f"plain {plain} searches every discrete action: python -m experiments.{plain_entry}")
    return action_space
