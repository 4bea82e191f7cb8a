"""One module per algorithm, grouped by family; each holds only what is particular to that algorithm.

A family folder holds its algorithms beside the one module they share:
  on_policy/     rollout.py (collect, minibatch, epochs) · policy_gradient.py (the actor-critic loop) · ppo.py ·
                 recurrent_ppo.py (PPO with LSTM/GRU networks) · ppo_penalty.py · dpo.py · reinforce.py · pqn.py
                 · vmpo.py
  q_learning/    value_based.py (Q heads, ε-greedy, the learn step) · dqn.py · distributional_dqn.py
  actor_critic/  continuous_control.py · deterministic_policy_gradient.py · sac.py · td3.py (and DDPG, config/system/ddpg.yaml) · d4pg.py
                 · awr.py (discrete and continuous, on replayed sequences)
                 · mpo.py
  search/        mcts.py (mctx: the env as model, the root, the search policy, search statistics) · alphazero.py
                 · sampled_alphazero.py (AlphaZero's learner over K actions drawn at every node: continuous actions)
                 · spo.py (AlphaZero's learner planning with a particle filter, SMC: either action kind)
                 · muzero.py (a learnt model, on replayed sequences through off_policy.py) · sampled_actions.py
                 (K continuous actions drawn at every node: what the sampled systems share) · sampled_muzero.py
                 (MuZero's learner over K draws at every node)
  off_policy.py  the replay-based skeleton that q_learning/, actor_critic/ and MuZero build on
  dual_variables.py  what MPO and V-MPO share (KL bounds per action kind, dual variables, the M-step)

`MODULE_OF` is the one registry: it names, for each `config/<algo>.yaml`, the module whose `learner_setup` and
`run_experiment` train it. `experiments/<algo>.py` names the algorithm only and finds its module here. Variants
that are configs of one system (DQN, Double DQN, M-DQN, DQN-Reg; TD3 and DDPG) share a module.
"""

from __future__ import annotations

import importlib
from types import ModuleType

MODULE_OF = {
    "ppo": "on_policy.ppo", "rec_ppo": "on_policy.recurrent_ppo", "ppo_penalty": "on_policy.ppo_penalty",
    "dpo": "on_policy.dpo", "impala": "on_policy.impala",
    "reinforce": "on_policy.reinforce", "pqn": "on_policy.pqn",
    "dqn": "q_learning.dqn", "ddqn": "q_learning.dqn", "mdqn": "q_learning.dqn", "dqn_reg": "q_learning.dqn",
    "c51": "q_learning.distributional_dqn", "qr_dqn": "q_learning.distributional_dqn",
    "rainbow": "q_learning.distributional_dqn", "r2d2": "q_learning.r2d2",
    "sac": "actor_critic.sac", "td3": "actor_critic.td3", "ddpg": "actor_critic.td3", "d4pg": "actor_critic.d4pg",
    "awr": "actor_critic.awr",
    "mpo": "actor_critic.mpo", "vmpo": "on_policy.vmpo",
    "az": "search.alphazero", "sampled_az": "search.sampled_alphazero", "spo": "search.spo",
    "mz": "search.muzero", "sampled_mz": "search.sampled_muzero",
}


def module_name(algorithm: str) -> str:
    """The dotted name of the module that trains `config/<algorithm>.yaml`."""
    return f"stoix_like.systems.{MODULE_OF[algorithm]}"


def system_module(algorithm: str) -> ModuleType:
    """The system module of `config/<algorithm>.yaml` (imported on demand: importing one loads no other)."""
    return importlib.import_module(module_name(algorithm))
