"""train's loggers: a W&B run (offline, on disk) holds the figures TensorBoard's events hold, at
the same iterations, with the run's config, each checkpoint's video and the final comparison."""

import hashlib
import json
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import needs_gl, tensorboard_scalars, tiny
from motrix_gym.learn.run_log import LoggerError, _flat
from motrix_gym.learn.train import train
from motrix_gym.registry import env_id


def wandb_records(run_dir: Path) -> list:
    """The records of the one W&B run under ``run_dir``, read from its transaction log (LevelDB's
    log format: 32 KiB blocks of chunks, each a 7-byte header of CRC, length and kind; W&B's file
    starts with a 7-byte header of its own)."""
    from wandb.proto import wandb_internal_pb2 as pb

    (log,) = run_dir.glob("wandb/offline-run-*/run-*.wandb")
    data = log.read_bytes()
    assert data[:4] == b":W&B"
    block, pos, chunk, records = 32768, 7, b"", []
    while pos + 7 <= len(data):
        left = block - pos % block
        if left < 7:  # a block's tail too short for a header is padding
            pos += left
            continue
        _, size, kind = struct.unpack("<IHB", data[pos:pos + 7])
        if size == 0 and kind == 0:
            pos += left
            continue
        chunk += data[pos + 7:pos + 7 + size]
        pos += 7 + size
        if kind in (1, 4):  # a whole record, or a record's last chunk
            record = pb.Record()
            record.ParseFromString(chunk)
            records.append(record)
            chunk = b""
    return records


def _key(item) -> str:
    return item.key or "/".join(item.nested_key)


def wandb_history(records: list) -> dict[str, dict[int, object]]:
    """key -> {step: value} over the run's logged rows."""
    out: dict[str, dict[int, object]] = {}
    for r in records:
        if r.WhichOneof("record_type") != "history":
            continue
        row = {_key(i): json.loads(i.value_json) for i in r.history.item}
        for key, value in row.items():
            if not key.startswith("_"):
                out.setdefault(key, {})[row["_step"]] = value
    return out


def wandb_train(tmp_path, monkeypatch, **options):
    """A 3-iteration run that logs to W&B offline, with 5-step episodes (so that episode figures exist)."""
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    return train(env_id("Go1WalkFlat"), iterations=3, log_dir=tmp_path, compile=False, progress=False,
                 config=tiny("Go1WalkFlat").with_(num_envs=8, num_steps_per_env=8, save_interval=2), logger="wandb",
                 task_options={"overrides": {"episode_length_s": 0.1}}, **options)


def test_a_wandb_run_holds_the_tensorboard_figures_config_and_comparison(tmp_path, monkeypatch):
    res = wandb_train(tmp_path, monkeypatch, eval_lanes=2, wandb_project="motrix-test")
    records = wandb_records(res.run_dir)
    kinds = [r.WhichOneof("record_type") for r in records]
    assert kinds.count("run") == 1 and kinds[-1] == "exit" and records[-1].exit.exit_code == 0
    run = next(r.run for r in records if r.WhichOneof("record_type") == "run")
    assert (run.project, run.run_group, run.display_name) == (
        "motrix-test", "Go1WalkFlat", f"Go1WalkFlat_{res.run_dir.name}")
    updates = [run.config] + [r.config for r in records if r.WhichOneof("record_type") == "config"]
    config = {_key(i): json.loads(i.value_json) for c in updates for i in c.update if _key(i) != "_wandb"}
    assert config["env_id"] == env_id("Go1WalkFlat") and config["ppo"]["num_envs"] == 8
    assert config == json.loads((res.run_dir / "config.json").read_text())

    history, board = wandb_history(records), tensorboard_scalars(res.run_dir)
    assert history.keys() == board.keys() and {"Train/mean_reward", "Loss/value", "Episode_Reward/alive",
                                                "Perf/total_fps"} <= board.keys()
    for key, steps in board.items():  # TensorBoard stores float32
        assert history[key].keys() == steps.keys() and set(steps) <= {0, 1, 2}, key
        assert history[key] == pytest.approx(steps, rel=1e-6, abs=1e-6), key
    assert board["Loss/learning_rate"].keys() == {0, 1, 2}

    summary = {}
    for r in records:
        if r.WhichOneof("record_type") == "summary":
            summary.update({_key(i): json.loads(i.value_json) for i in r.summary.update})
    saved = _flat(json.loads((res.run_dir / "summary.json").read_text()))
    assert saved["eval/policy/mean_episode_length"] > 0 and "eval/zero/reward_terms/track_lin_vel" in saved
    assert {k: summary[k] for k in saved} == saved


@needs_gl
def test_a_wandb_run_holds_each_checkpoint_s_video(tmp_path, monkeypatch):
    res = wandb_train(tmp_path, monkeypatch, eval_lanes=0, video=True, video_length=4)
    history = wandb_history(wandb_records(res.run_dir))
    assert history["video/_type"] == {1: "video-file", 2: "video-file"}  # the checkpoints' (iterations 1 and 2)
    for it, digest in history["video/sha256"].items():  # the file itself
        assert digest == hashlib.sha256((res.run_dir / "videos" / f"model_{it}.mp4").read_bytes()).hexdigest()


def test_logger_settings_are_checked_before_a_run_starts(tmp_path, monkeypatch):
    go1 = env_id("Go1WalkFlat")
    for bad, message in (({"logger": "neptune"}, "logger must be one of"),
                         ({"wandb_project": "p"}, "needs logger 'wandb'"),
                         ({"logger": "wandb", "wandb_project": " "}, "non-empty name")):
        with pytest.raises(ValueError, match=message):
            train(go1, iterations=1, log_dir=tmp_path, progress=False, **bad)
    monkeypatch.setitem(sys.modules, "wandb", None)  # as if it were not installed
    with pytest.raises(ImportError, match=r"pip install -e \"\.\[wandb\]\""):
        train(go1, iterations=1, log_dir=tmp_path, progress=False, logger="wandb")
    assert not tmp_path.joinpath("Go1WalkFlat").exists() or not any(tmp_path.joinpath("Go1WalkFlat").iterdir())
    for argv, message in ((["--logger", "neptune"], "invalid choice: 'neptune'"),
                          (["--wandb-project", "p"], "argument --wandb-project: a W&B project ('p') needs logger")):
        run = subprocess.run([sys.executable, "-m", "motrix_gym", "train", "Go1WalkFlat", "--log-dir", str(tmp_path),
                              *argv], capture_output=True, text=True)
        assert run.returncode == 2 and message in run.stderr and "Traceback" not in run.stderr, run.stderr


def test_a_run_wandb_cannot_start_says_why_and_leaves_no_folder(tmp_path, monkeypatch):
    for name in ("WANDB_API_KEY", "WANDB_MODE"):
        monkeypatch.delenv(name, raising=False)
    # online, with no login anywhere W&B looks for one: it refuses before reaching the network
    monkeypatch.setenv("NETRC", str(tmp_path / "netrc"))
    monkeypatch.setenv("WANDB_CONFIG_DIR", str(tmp_path / "config"))
    logs = tmp_path / "logs"
    with pytest.raises(LoggerError, match="W&B could not start the run: No API key configured"):
        train(env_id("Go1WalkFlat"), iterations=1, log_dir=logs, compile=False, eval_lanes=0, progress=False,
              config=tiny("Go1WalkFlat"), logger="wandb")
    assert not any(logs.joinpath("Go1WalkFlat").iterdir())
    run = subprocess.run([sys.executable, "-m", "motrix_gym", "train", "Go1WalkFlat", "--iterations", "1",
                          "--no-compile", "--log-dir", str(logs), "--logger", "wandb", "--num-envs", "4"],
                         capture_output=True, text=True, stdin=subprocess.DEVNULL)
    assert run.returncode == 2 and "error: W&B could not start the run" in run.stderr, run.stderr
    assert "Traceback" not in run.stderr and not any(logs.joinpath("Go1WalkFlat").iterdir())
