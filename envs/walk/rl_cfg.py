"""PPO defaults of the velocity-tracking family (``python -m motrix_gym train``)."""

from motrix_gym.learn.config import PpoConfig

WALK = PpoConfig(num_envs=256, num_steps_per_env=24, actor_hidden=(256, 128, 128), critic_hidden=(256, 128, 128),
                 entropy_coef=0.01, learning_rate=1e-3)

# A quadruped's physics costs a fraction of a humanoid's: more lanes give more samples per second.
QUADRUPED = WALK.with_(num_envs=1024)
