"""Motion clips: the loader's checks, the converters, and the plausibility of every bundled clip."""

import numpy as np
import pytest

from motrix_gym.envs.robots import G1, velocity_limits
from motrix_gym.envs.wbt.choreography import CLIPS
from motrix_gym.envs.wbt.g1 import MOTIONS
from motrix_gym.motion import MotionClip, MotionFormatError
from motrix_gym.motion.checks import margins
from motrix_gym.motion.convert import from_beyondmimic, from_csv, to_beyondmimic, to_csv
from motrix_gym.motion.loader import load_corpus, resample
from motrix_gym.motion.synth import bundled_clip, bundled_synthesizer

SYNTH = bundled_synthesizer("g1")
MODEL = SYNTH.m
SOLVED = {c: bundled_clip("g1", c, SYNTH) for c in CLIPS}


def clip() -> MotionClip:
    return MotionClip.load(MOTIONS / "g1_kick.npz")


def test_bundled_clips_are_regenerated_identically():
    for name, solved in SOLVED.items():
        bundled = MotionClip.load(MOTIONS / f"g1_{name}.npz")
        fresh = solved.clip
        assert bundled.joint_names == fresh.joint_names and bundled.body_names == fresh.body_names
        for key in ("joint_pos", "joint_vel", "body_pos_w", "body_quat_w", "body_lin_vel_w", "body_ang_vel_w"):
            np.testing.assert_allclose(getattr(bundled, key), getattr(fresh, key), atol=1e-4, err_msg=key)


@pytest.mark.parametrize("name", sorted(CLIPS))
def test_clip_plausibility(name):
    solved = SOLVED[name]
    m = margins(MODEL, solved.clip, solved.planted, solved.feet, velocity_limits(G1, solved.clip.joint_names))
    assert m["limit_excess"] <= 1e-6, m
    assert m["speed_ratio"] < 1.0, m
    assert m["sink"] < 0.005, m
    assert m["slide"] < 0.01, m
    assert m["com_margin"] >= 0.01, m
    assert m["penetration"] < 0.01, m
    print(name, {k: round(v, 4) for k, v in m.items()})


def test_dance_length():
    assert 20.0 <= SOLVED["dance"].clip.duration <= 40.0


def test_kick_has_single_support():
    planted = SOLVED["kick"].planted
    assert (~planted[:, 1]).any() and planted[:, 0].all()


# ------------------------------------------------------------------------ loader
def test_nan_is_rejected():
    bad = clip()
    pos = bad.joint_pos.copy()
    pos[7, 3] = np.nan
    with pytest.raises(MotionFormatError, match="joint_pos has NaN.*frame 7"):
        bad.replace(joint_pos=pos).validate()


def test_non_unit_quaternion_is_rejected():
    bad = clip()
    q = bad.body_quat_w.copy()
    q[3, 2] *= 1.5
    with pytest.raises(MotionFormatError, match="not a unit quaternion"):
        bad.replace(body_quat_w=q).validate()


def test_missing_joint_is_named(tmp_path):
    c = clip()
    keep = [i for i, n in enumerate(c.joint_names) if n != "left_knee_joint"]
    partial = c.replace(joint_names=tuple(c.joint_names[i] for i in keep), joint_pos=c.joint_pos[:, keep],
                        joint_vel=c.joint_vel[:, keep])
    partial.save(tmp_path / "partial.npz")
    with pytest.raises(MotionFormatError, match="left_knee_joint"):
        load_corpus(tmp_path / "partial.npz", c.joint_names, c.body_names, fps=c.fps)


def test_fps_mismatch_is_an_error_or_resampled(tmp_path):
    c = clip()
    slow = resample(c, 25.0)
    slow.save(tmp_path / "slow.npz")
    with pytest.raises(MotionFormatError, match="25.0 fps"):
        load_corpus(tmp_path / "slow.npz", c.joint_names, c.body_names, fps=50.0, resample_fps=False)
    corpus = load_corpus(tmp_path / "slow.npz", c.joint_names, c.body_names, fps=50.0)
    assert corpus.fps == 50.0 and abs(corpus.num_frames - c.num_frames) <= 1
    np.testing.assert_allclose(corpus.joint_pos.numpy(), c.joint_pos[: corpus.num_frames], atol=0.02)


def test_folder_and_list_make_one_corpus(tmp_path):
    c = clip()
    corpus = load_corpus(MOTIONS, c.joint_names, c.body_names, fps=c.fps)
    assert len(corpus.names) == 4 and corpus.clip_start[0] == 0
    assert int(corpus.clip_length.sum()) == corpus.num_frames
    two = load_corpus([MOTIONS / "g1_kick.npz", MOTIONS / "g1_wave.npz"], c.joint_names, c.body_names, fps=c.fps)
    assert two.names == ("g1_kick", "g1_wave") and int(two.clip_start[1]) == c.num_frames
    with pytest.raises(MotionFormatError, match="does not exist"):
        load_corpus(tmp_path / "nope.npz", c.joint_names, c.body_names, fps=c.fps)


# ------------------------------------------------------------------------ converters
def assert_clips_close(a: MotionClip, b: MotionClip, atol: float) -> None:
    for key in ("joint_pos", "joint_vel", "body_pos_w", "body_quat_w", "body_lin_vel_w", "body_ang_vel_w"):
        np.testing.assert_allclose(getattr(a, key), getattr(b, key), atol=atol, err_msg=key)


def test_beyondmimic_round_trip(tmp_path):
    c = SOLVED["kick"].clip
    to_beyondmimic(c, tmp_path / "bm.npz", MODEL)
    back = from_beyondmimic(tmp_path / "bm.npz", MODEL)
    assert_clips_close(c, back, 1e-5)


def test_csv_round_trip(tmp_path):
    c = SOLVED["kick"].clip
    to_csv(c, tmp_path / "kick.csv", MODEL, root="pelvis")
    back = from_csv(tmp_path / "kick.csv", MODEL, fps=c.fps)
    assert_clips_close(c, back, 1e-5)


def test_csv_wrong_columns(tmp_path):
    (tmp_path / "bad.csv").write_text("0,0,0.8,0,0,0,1,0.1\n" * 3)
    with pytest.raises(MotionFormatError, match="columns"):
        from_csv(tmp_path / "bad.csv", MODEL, fps=50.0)
