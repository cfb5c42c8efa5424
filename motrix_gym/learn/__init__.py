"""Training and watching policies: ``python -m motrix_gym train`` and ``play``, on rsl_rl's PPO."""
