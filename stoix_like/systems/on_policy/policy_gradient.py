"""The actor-critic loop PPO, PPO-penalty, DPO, REINFORCE and IMPALA share, parameterised by the actor's objective.

One update: roll the current policy out, recording each step's value, log-probability and the acting
distribution's parameters → advantages and value targets (truncation-correct GAE, or the objective's own: IMPALA's
V-trace) → epochs × minibatches of actor and critic updates → the objective adapts to how far the update moved the
policy (PPO-penalty's β; the others carry no state).

An algorithm is an `ActorObjective` (its policy loss, its targets if not GAE's and, if it has one, how its state
adapts) and a `CriticLoss` (PPO's clipped value loss, or plain regression); `make_system_setup` builds the networks,
optimisers and state around them. The networks are read through `networks.actor_critic.PolicyAndValue`, from the
whole (actor, critic) params pair, so that separate networks and a shared torso (`network.shared_torso`) learn by
one gradient of the summed losses.
"""

from __future__ import annotations

import functools
from typing import Callable, NamedTuple, Optional, Protocol, Tuple

import jax
import jax.numpy as jnp
from omegaconf import DictConfig

from stoix_like.runtime import host_keys, parallel
from stoix_like.learner import hyperparams, normalization
from stoix_like.learner.budget import Budget
from stoix_like.runtime.compilation_cache import jitted_inits
from stoix_like.envs.cpu_vector_env import CpuVectorEnv
from stoix_like.envs.environment import ActionSpace, Environment, example_observation
from stoix_like.envs.wrappers import VmapWrapper
from stoix_like.learner.evaluator import EvalPolicy, actor_policy
from stoix_like.networks import actor_critic
from stoix_like.networks.actor_critic import PolicyAndValue
from stoix_like.networks.factory import build_actor, build_critic, build_critic_on_actor_torso
from stoix_like.ops.losses import clipped_value_loss, l2_loss
from stoix_like.ops.returns import truncated_gae
from stoix_like.learner.optim import make_optimizer
from stoix_like.learner.system_contract import Learner, LearnerOutput, SebulbaSetup, SystemSetup
from stoix_like.systems.on_policy import rollout
from stoix_like.types import (ActorCriticApplyFns, ActorCriticOptStates, ActorCriticParams, ActorCriticTransition,
                               ActorCriticUpdateFns, Array, LearnerState, Metrics, Observation, OnPolicyLearnerState,
                               Params, PRNGKey, PyTree, RolloutStep)


class SebulbaLearnerState(NamedTuple):
    """An on-policy learner state fed by Sebulba's actor threads: the envs live on the host with the actors, so
    the state holds only what learning moves. Leaves carry (learner devices, 1, ...)."""

    params: ActorCriticParams
    opt_states: ActorCriticOptStates
    key: PRNGKey
    obs_norm: PyTree  # normalization.RunningStatistics, or () when system.normalize_observations is off


class PolicyLossInputs(NamedTuple):
    """What an actor objective sees of one minibatch, `[B]` each."""

    log_prob: Array  # log π(a|s) under the actor being learnt (differentiated)
    behaviour_log_prob: Array  # log π_old(a|s), recorded when acting
    advantages: Array  # standardised over the minibatch when system.standardize_advantages
    kl: Array  # KL(π_old(·|s) ‖ π(·|s)), exact, from the recorded distribution (differentiated through π)


def _stateless(learner_state: LearnerState) -> Tuple[()]:
    del learner_state
    return ()


# targets(networks, params, obs_norm, rollout) -> (advantages, value targets), `(T, envs)` each, from the rollout
# and the learner's params as the update starts (the rollout's transitions carry what the actors recorded and the
# values read after it)
RolloutTargets = Callable[[PolicyAndValue, ActorCriticParams, PyTree, ActorCriticTransition], Tuple[Array, Array]]


class ActorObjective(NamedTuple):
    """How an on-policy actor learns from a rollout."""

    # (inputs, objective state) -> the scalar to minimise (the entropy bonus is added by the loop)
    policy_loss: Callable[[PolicyLossInputs, PyTree], Array]
    # the advantages and value targets; None: truncation-correct GAE(system.gae_lambda) on the rollout's values
    targets: Optional[RolloutTargets] = None
    # learner state -> the objective's state, read once per update and fixed through its epochs (PPO-penalty: β)
    state_of: Callable[[LearnerState], PyTree] = _stateless
    # after each update: (learner state, E_s[KL(π_old ‖ π_new)] over the rollout and every slot) -> (learner state
    # with the objective's state adapted, metrics). None: the objective has no state to adapt.
    adapt: Optional[Callable[[LearnerState, Array], Tuple[LearnerState, Metrics]]] = None


# critic_loss(values, values before the update, targets) -> the scalar to minimise (before
# system.vf_coef)
CriticLoss = Callable[[Array, Array, Array], Array]


def clipped_critic(system: DictConfig) -> CriticLoss:
    """PPO's critic: the value may not gain by moving more than `system.clip_eps` from its prediction before the
    update (read when the loss is traced, so that a sweep's members each read their own)."""

    def critic_loss(values: Array, values_before: Array, targets: Array) -> Array:
        return clipped_value_loss(values, values_before, targets, clip_eps=hyperparams.value(system, "clip_eps"))

    return critic_loss


def regression_critic(values: Array, values_before: Array, targets: Array) -> Array:
    """A plain baseline: 0.5 · mean((V(s) - target)²)."""
    del values_before
    return jnp.mean(l2_loss(values - targets))


def ppo_critic(system: DictConfig) -> CriticLoss:
    """PPO's critic as `system.clip_value_loss` says: clipped at `clip_eps` per update, or plain regression. The
    clip is absolute, so when returns run into the hundreds (brax locomotion) it holds the value back for hundreds
    of updates; brax's own PPO does not clip."""
    return clipped_critic(system) if system.clip_value_loss else regression_critic


class ActionDistribution(Protocol):
    """What the losses read of the policy's distribution at a minibatch's steps (networks/distributions.py)."""

    def log_prob(self, action: jax.Array) -> jax.Array: ...
    def kl_from(self, behaviour: PyTree) -> jax.Array: ...  # KL(π_old ‖ π) from π_old's recorded `parameters()`
    def entropy(self, seed: jax.Array) -> jax.Array: ...


class MinibatchApply(NamedTuple):
    """How a learner applies its networks to one of its minibatches (feed-forward: to each step alone; recurrent:
    to whole sequences from their stored hidden state), so that one loss and one update serve both."""

    # ((actor, critic) params, obs_norm, minibatch) -> the policy's distribution at the minibatch's steps, `[B]`
    actor: Callable[[ActorCriticParams, PyTree, PyTree], ActionDistribution]
    # ((actor, critic) params, obs_norm, minibatch) -> V at the minibatch's steps, `[B]`
    critic: Callable[[ActorCriticParams, PyTree, PyTree], Array]
    # minibatch -> (its steps' transitions, advantages, value targets), `[B]` each, in the networks' step order
    steps: Callable[[PyTree], Tuple[ActorCriticTransition, Array, Array]]


def feed_forward_apply(networks: PolicyAndValue) -> MinibatchApply:
    """The minibatch is `(transitions, advantages, targets)` of shuffled steps; each step is read alone."""
    return MinibatchApply(
        actor=lambda params, obs_norm, minibatch: networks.policy(
            params, normalization.normalize(obs_norm, minibatch[0].observation)),
        critic=lambda params, obs_norm, minibatch: networks.value(
            params, normalization.normalize(obs_norm, minibatch[0].observation)),
        steps=lambda minibatch: minibatch,
    )


def make_update_minibatch(apply: MinibatchApply, update_fns: ActorCriticUpdateFns, system: DictConfig,
                          objective: ActorObjective, critic_loss: CriticLoss) -> Callable:
    """`update_minibatch((params, opt_states, obs_norm), minibatch, entropy_key, objective_state)`: one step of
    the actor on `objective` (with the entropy bonus) and of the critic on `critic_loss`, the gradients and
    metrics averaged over the update batch and the devices. One gradient of the summed losses over the whole
    params pair: with separate networks each half gets its own loss's gradient alone, and a shared torso gets
    both."""

    def actor_loss(params, minibatch, obs_norm, key: jax.Array, objective_state: PyTree):
        dist = apply.actor(params, obs_norm, minibatch)
        traj, advantages, _ = apply.steps(minibatch)
        log_prob = dist.log_prob(traj.action)
        if system.standardize_advantages:
            advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
        kl = dist.kl_from(traj.behaviour)
        policy_loss = objective.policy_loss(PolicyLossInputs(log_prob, traj.log_prob, advantages, kl), objective_state)
        entropy = dist.entropy(seed=key).mean()
        approx_kl = jnp.mean(traj.log_prob - log_prob)
        total = policy_loss - hyperparams.value(system, "ent_coef") * entropy
        return total, {"actor_loss": policy_loss, "entropy": entropy, "approx_kl": approx_kl, "kl": jnp.mean(kl)}

    def critic_loss_and_metrics(params, minibatch, obs_norm):
        values = apply.critic(params, obs_norm, minibatch)
        traj, _, targets = apply.steps(minibatch)
        value_loss = critic_loss(values, traj.value, targets)
        return hyperparams.value(system, "vf_coef") * value_loss, {"value_loss": value_loss}

    def total_loss(params, minibatch, obs_norm, key: jax.Array, objective_state: PyTree):
        actor_total, actor_metrics = actor_loss(params, minibatch, obs_norm, key, objective_state)
        critic_total, critic_metrics = critic_loss_and_metrics(params, minibatch, obs_norm)
        return actor_total + critic_total, {**actor_metrics, **critic_metrics}

    def update_minibatch(carry, minibatch, entropy_key: jax.Array, objective_state: PyTree):
        params, opt_states, obs_norm = carry
        grads, metrics = jax.grad(total_loss, has_aux=True)(params, minibatch, obs_norm, entropy_key, objective_state)
        params, opt_states, metrics = apply_gradients(update_fns, params, opt_states, grads.actor, grads.critic,
                                                      metrics)
        return (params, opt_states, obs_norm), metrics

    return update_minibatch


def apply_gradients(update_fns: ActorCriticUpdateFns, params: ActorCriticParams, opt_states: ActorCriticOptStates,
                    actor_grads: Params, critic_grads: Params, metrics: Metrics
                    ) -> Tuple[ActorCriticParams, ActorCriticOptStates, Metrics]:
    """One optimiser step of the actor and the critic on one slot's gradients, averaged over the update batch and
    the devices first (the metrics too), so that every replica takes the same step."""
    actor_grads, critic_grads, metrics = parallel.pmean_batch_then_device((actor_grads, critic_grads, metrics))
    actor_updates, actor_opt = update_fns.actor(actor_grads, opt_states.actor, params.actor)
    critic_updates, critic_opt = update_fns.critic(critic_grads, opt_states.critic, params.critic)
    params = ActorCriticParams(
        jax.tree_util.tree_map(jnp.add, params.actor, actor_updates),
        jax.tree_util.tree_map(jnp.add, params.critic, critic_updates),
    )
    return params, ActorCriticOptStates(actor_opt, critic_opt), metrics


def make_act(networks: PolicyAndValue) -> rollout.ActFn:
    """`act(params, normalised observation, key)`: a sampled action, and what the update needs recorded of the
    policy that drew it (the log-probability and the acting distribution's parameters). Anakin's rollout and
    Sebulba's actor threads act with this one function. The critic is not run here: `learn_from_steps` reads the
    rollout's values afterwards (rollout.step_and_successor_values)."""

    def act(params: ActorCriticParams, observation, key: jax.Array):
        dist = networks.policy(params, observation)
        action = dist.sample(key)
        recorded = {"log_prob": dist.log_prob(action), "behaviour": dist.parameters()}
        return action, dist.to_env_action(action), recorded

    return act


# learn_from_steps(state, rollout) -> (state, transitions, train metrics): one update on a collected rollout
LearnFromSteps = Callable[[LearnerState, RolloutStep], Tuple[LearnerState, ActorCriticTransition, Metrics]]


def gae_targets(system: DictConfig) -> RolloutTargets:
    """Truncation-correct GAE(system.gae_lambda) on the rollout's values."""

    def targets(networks: PolicyAndValue, params: ActorCriticParams, obs_norm: PyTree, traj: ActorCriticTransition
                ) -> Tuple[Array, Array]:
        del networks, params, obs_norm
        return truncated_gae(traj.reward, traj.value, traj.next_value, traj.done, traj.truncated,
                             hyperparams.value(system, "gamma"), hyperparams.value(system, "gae_lambda"))

    return targets


def make_learn_from_steps(networks: PolicyAndValue, update_fns: ActorCriticUpdateFns, system: DictConfig,
                          objective: ActorObjective, critic_loss: CriticLoss) -> LearnFromSteps:
    """One update on a time-major rollout, wherever it was collected (Anakin's scan over a JAX env, or Sebulba's
    actor threads over CPU envs): values of the true successors → the objective's targets (GAE by default) →
    epochs × minibatches → the objective adapts. The state needs params, opt_states, key and obs_norm
    (rollout.LearningState)."""
    update_minibatch = make_update_minibatch(feed_forward_apply(networks), update_fns, system, objective,
                                             critic_loss)
    rollout_targets = objective.targets or gae_targets(system)

    def policy_shift(params, obs_norm, traj: ActorCriticTransition) -> Array:
        """E_s[KL(π_old ‖ π)] over the rollout's states, averaged over every slot so that all adapt alike."""
        observation, behaviour = jax.tree_util.tree_map(
            lambda x: x.reshape((-1,) + x.shape[2:]), (traj.observation, traj.behaviour))
        dist = networks.policy(params, normalization.normalize(obs_norm, observation))
        return parallel.pmean_batch_then_device(jnp.mean(dist.kl_from(behaviour)))

    def learn_from_steps(state, steps: RolloutStep) -> Tuple[LearnerState, ActorCriticTransition, Metrics]:
        values, next_values = rollout.step_and_successor_values(
            lambda observation: networks.value(state.params, observation), state.obs_norm, steps)
        traj = transitions(steps, values, next_values, hyperparams.value(system, "reward_scale"))
        advantages, targets = rollout_targets(networks, state.params, state.obs_norm, traj)
        acting_obs_norm = state.obs_norm  # learn_from_rollout moves the statistics only after learning

        def refreshed_targets(carry, batch):
            """The rollout's values, advantages and targets again, under the params an epoch starts from."""
            params, _, obs_norm = carry
            values, next_values = rollout.step_and_successor_values(
                lambda observation: networks.value(params, observation), obs_norm, steps)
            fresh = batch[0]._replace(value=values, next_value=next_values)
            return (fresh,) + tuple(rollout_targets(networks, params, obs_norm, fresh))

        learn_minibatch = functools.partial(update_minibatch, objective_state=objective.state_of(state))
        state, train_metrics = rollout.learn_from_rollout(
            learn_minibatch, state, (traj, advantages, targets), traj.observation, system,
            refresh=refreshed_targets if system.recompute_advantages else None)
        if objective.adapt is not None:
            state, adapt_metrics = objective.adapt(state, policy_shift(state.params, acting_obs_norm, traj))
            train_metrics = {**train_metrics, **adapt_metrics}
        return state, traj, train_metrics

    return learn_from_steps


def get_learner_fn(env: VmapWrapper, networks: PolicyAndValue, update_fns: ActorCriticUpdateFns,
                   config: DictConfig, budget: Budget, objective: ActorObjective, critic_loss: CriticLoss) -> Learner:
    act = make_act(networks)
    learn_from_steps = make_learn_from_steps(networks, update_fns, config.system, objective, critic_loss)

    def update_step(state) -> Tuple[LearnerState, LearnerOutput]:
        state, steps = rollout.collect_rollout(env, act, state, config.system.rollout_length,
                                                config.arch.rollout_unroll)
        state, traj, train_metrics = learn_from_steps(state, steps)
        return state, LearnerOutput(episode_metrics=traj.episode_metrics, train_metrics=train_metrics)

    return parallel.scan_updates(update_step, budget.updates_per_evaluation)


def transitions(steps: RolloutStep, values: Array, next_values: Array, reward_scale: hyperparams.Number
                ) -> ActorCriticTransition:
    """A rollout's steps as the transitions GAE and the losses read, rewards × `reward_scale` (the episode metrics
    keep the env's own returns); `steps.policy_extras` holds what `act` recorded (log-prob, the acting
    distribution's parameters)."""
    return ActorCriticTransition(
        done=steps.done,
        truncated=steps.done & (steps.discount != 0.0),
        action=steps.action,
        value=values,
        next_value=next_values,
        reward=reward_scale * steps.reward,
        log_prob=steps.policy_extras["log_prob"],
        behaviour=steps.policy_extras["behaviour"],
        observation=steps.observation,
        episode_metrics=steps.episode_metrics,
    )


def actor_critic_optimizers(system: DictConfig, budget: Budget, params: ActorCriticParams
                            ) -> Tuple[ActorCriticOptStates, ActorCriticUpdateFns]:
    """The actor's and the critic's optimisers (`actor_lr`, `critic_lr`, decayed over the run's optimiser
    steps): their initial states and update functions."""
    optimizer_steps = rollout.optimizer_steps(system, budget)
    actor_optimizer = make_optimizer(hyperparams.learning_rate(system, "actor_lr"), system.max_grad_norm, optimizer_steps,
                                     system.decay_learning_rates)
    critic_optimizer = make_optimizer(hyperparams.learning_rate(system, "critic_lr"), system.max_grad_norm,
                                      optimizer_steps, system.decay_learning_rates)
    return (ActorCriticOptStates(actor_optimizer.init(params.actor), critic_optimizer.init(params.critic)),
            ActorCriticUpdateFns(actor_optimizer.update, critic_optimizer.update))


class ActorCriticSetup(NamedTuple):
    """An on-policy actor-critic's networks, optimisers and initial state, before its learner is built."""

    apply_fns: ActorCriticApplyFns  # each network on its own params (AlphaZero's search reads them so)
    networks: PolicyAndValue  # both read from the params pair (what the policy-gradient learner reads)
    update_fns: ActorCriticUpdateFns
    learner_state: LearnerState
    eval_policy: EvalPolicy


class ActorCriticSlot(Protocol):
    """What `eval_params` and `actor_params` read of one slot of an actor-critic's learner state."""

    @property
    def params(self) -> ActorCriticParams: ...
    @property
    def obs_norm(self) -> PyTree: ...


def eval_params(slot: ActorCriticSlot) -> Tuple[Params, PyTree]:
    """What `actor_policy` evaluates of one slot of an on-policy actor-critic's state."""
    return slot.params.actor, slot.obs_norm


def build_actor_critic(env: Environment, key: jax.Array, config: DictConfig, budget: Budget,
                       state_type: Callable[..., LearnerState] = OnPolicyLearnerState, **extra_state: PyTree
                       ) -> ActorCriticSetup:
    """Separate actor and critic networks and optimisers (`actor_critic_optimizers`), and the initial state
    (`state_type`, with `extra_state` besides the on-policy fields). Shared by every feed-forward on-policy
    actor-critic and by AlphaZero, whose policy and value networks are these."""
    system = config.system
    rollout.check_minibatches(system, budget)
    key, actor_key, critic_key, env_key, step_key = host_keys.split(key, 5)
    networks = actor_critic_networks(env.action_space, example_observation(env), actor_key, critic_key, config,
                                     budget)
    learner_state = rollout.initial_learner_state(state_type, env, env_key, step_key, system, budget,
                                                  params=networks.params, opt_states=networks.opt_states,
                                                  **extra_state)
    return ActorCriticSetup(networks.apply_fns, networks.networks, networks.update_fns, learner_state,
                            networks.eval_policy)


class ActorCriticNetworks(NamedTuple):
    apply_fns: ActorCriticApplyFns
    networks: PolicyAndValue
    update_fns: ActorCriticUpdateFns
    params: ActorCriticParams
    opt_states: ActorCriticOptStates
    eval_policy: EvalPolicy


def actor_critic_networks(action_space: ActionSpace, observation: Observation, actor_key: jax.Array, critic_key: jax.Array,
                          config: DictConfig, budget: Budget) -> ActorCriticNetworks:
    """The actor and critic for `action_space`, initialised on `observation` (a batch of 1), and their optimisers:
    what Anakin's and Sebulba's learners of one system share. `network.shared_torso: True` puts the critic's head
    on the actor's torso (networks/actor_critic.py)."""
    shared = bool(config.network.get("shared_torso", False))
    actor = build_actor(config.network, action_space)
    critic = build_critic_on_actor_torso(config.network) if shared else build_critic(config.network)
    # jitted: an eager flax init dispatches one tiny XLA program per layer operation
    actor_params, critic_params = jitted_inits(actor, critic)((actor_key, critic_key), observation)
    params = ActorCriticParams(actor_params, actor_critic.drop_torso(critic_params) if shared else critic_params)
    networks = (actor_critic.shared_torso if shared else actor_critic.separate_networks)(actor.apply, critic.apply)
    opt_states, update_fns = actor_critic_optimizers(config.system, budget, params)
    return ActorCriticNetworks(ActorCriticApplyFns(actor.apply, critic.apply), networks, update_fns, params, opt_states,
                               actor_policy(actor.apply, greedy=bool(config.arch.evaluation_greedy)))


def actor_params(slot: ActorCriticSlot) -> Tuple[ActorCriticParams, PyTree]:
    """What `make_act` acts with, and the statistics that normalise what it sees, of one learner slot."""
    return slot.params, slot.obs_norm


def make_sebulba_setup(envs: CpuVectorEnv, key: jax.Array, config: DictConfig, budget: Budget, n_learner_devices: int,
                   objective: ActorObjective, critic_loss: CriticLoss) -> SebulbaSetup:
    """A system's learner for arch=sebulba: the networks, optimisers, acting function and update Anakin's `make_system_setup`
    builds, with the rollout collected by actor threads over CPU `envs` (cpu_vector_env.CpuVectorEnv)."""
    system = config.system
    rollout.check_minibatches(system, budget)
    key, actor_key, critic_key, _, step_key = host_keys.split(key, 5)  # the split Anakin's make_system_setup makes
    observation = Observation(agent_view=jnp.zeros((1,) + tuple(envs.observation_shape), jnp.float32),
                              action_mask=jnp.ones((1, getattr(envs.action_space, "num_actions", 1)), bool),
                              step_count=jnp.zeros((1,), jnp.int32))
    networks = actor_critic_networks(envs.action_space, observation, actor_key, critic_key, config, budget)
    obs_norm = normalization.init(tuple(envs.observation_shape)) if system.normalize_observations else ()
    keys = host_keys.split(step_key, n_learner_devices).reshape(n_learner_devices, 1, -1)
    slots = parallel.replicate_over_slots((networks.params, networks.opt_states, obs_norm), n_learner_devices)
    learner_state = SebulbaLearnerState(params=slots[0], opt_states=slots[1], key=keys,
                                        obs_norm=slots[2])
    learn_from_steps = make_learn_from_steps(networks.networks, networks.update_fns, system, objective,
                                             critic_loss)

    def learn_step(state: SebulbaLearnerState, steps: RolloutStep) -> Tuple[SebulbaLearnerState, Metrics]:
        state, _, train_metrics = learn_from_steps(state, steps)
        return state, train_metrics

    return SebulbaSetup(act=make_act(networks.networks), learn_step=learn_step, learner_state=learner_state,
                        actor_params=actor_params, eval_policy=networks.eval_policy, eval_params=eval_params)


def make_system_setup(env: Environment, key: jax.Array, config: DictConfig, budget: Budget, objective: ActorObjective,
           critic_loss: CriticLoss, state_type: Callable[..., LearnerState] = OnPolicyLearnerState,
           **objective_state: PyTree) -> SystemSetup:
    """A system's `learner_setup`: separate actor and critic networks and optimisers, and the initial state
    (`state_type`, with the objective's own fields `objective_state` besides the on-policy ones)."""
    parts = build_actor_critic(env, key, config, budget, state_type, **objective_state)
    learner_fn = get_learner_fn(VmapWrapper(env), parts.networks, parts.update_fns, config, budget, objective,
                                critic_loss)
    return SystemSetup(learner_fn=learner_fn, learner_state=parts.learner_state, eval_policy=parts.eval_policy,
                       eval_params=eval_params)
