import subprocess
import sys

import gymnasium as gym

from conftest import ENV_ID


def test_import_is_cheap():
    code = "import motrix_gym, sys; assert 'torch' not in sys.modules and 'mujoco' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_ids_registered():
    assert ENV_ID in gym.registry
    spec = gym.spec(ENV_ID)
    assert spec.vector_entry_point and spec.entry_point


def test_cli_list_and_run():
    out = subprocess.run([sys.executable, "-m", "motrix_gym", "list"], check=True, capture_output=True, text=True)
    assert ENV_ID in out.stdout
    assert "\n  sampling, mode: G1WbtDance, G1WbtKick, G1WbtMix, T1WbtDance, T1WbtKick\n" in out.stdout
    assert "\n  mode, command, command_curriculum, heading_command: G1WalkFlat, G1WalkRough, " in out.stdout
    out = subprocess.run([sys.executable, "-m", "motrix_gym", "run", ENV_ID, "--num-envs", "4", "--steps", "5",
                          "--no-compile"], check=True, capture_output=True, text=True)
    assert "env-steps/s" in out.stdout and "track_lin_vel" in out.stdout


def test_version_is_the_installed_distribution_s():
    from importlib.metadata import version

    out = subprocess.run([sys.executable, "-m", "motrix_gym", "--version"], check=True, capture_output=True,
                         text=True)
    assert out.stdout.strip() == f"motrix-gym {version('motrix-gym')}"


def test_vendored_assets_match_sources():
    subprocess.run([sys.executable, "scripts/vendor_assets.py", "--check"], check=True)
