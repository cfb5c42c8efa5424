"""PPO defaults of ball balancing (``python -m motrix_gym train``)."""

from motrix_gym.learn.config import PpoConfig

BALANCE = PpoConfig(num_envs=256, num_steps_per_env=24, actor_hidden=(256, 128, 128), critic_hidden=(256, 128, 128),
                    entropy_coef=0.005, learning_rate=1e-3)
