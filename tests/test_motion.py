"""Motion clips: the loader's checks, the converters, and the plausibility of every bundled clip."""

import numpy as np
import pytest

from motrix_gym.envs.robots import G1, T1, velocity_limits
from motrix_gym.envs.wbt.choreography import CLIPS
from motrix_gym.envs.wbt.tracking import MOTIONS
from motrix_gym.motion import MotionClip, MotionFormatError
from motrix_gym.motion.checks import margins
from motrix_gym.motion.convert import from_beyondmimic, from_csv, to_beyondmimic, to_csv
from motrix_gym.motion.loader import load_corpus, resample
from motrix_gym.motion.synth import bundled_clip, bundled_synthesizer

SYNTH = {r: bundled_synthesizer(r) for r in ("g1", "t1")}
MODEL = SYNTH["g1"].m
SOLVED = {(r, c): bundled_clip(r, c, SYNTH[r]) for r in SYNTH for c in CLIPS}


def clip() -> MotionClip:
    return MotionClip.load(MOTIONS / "g1_kick.npz")


def test_bundled_clips_are_regenerated_identically():
    assert {p.stem for p in MOTIONS.glob("*.npz")} == {f"{r}_{c}" for r, c in SOLVED}
    for (robot, name), solved in SOLVED.items():
        bundled = MotionClip.load(MOTIONS / f"{robot}_{name}.npz")
        fresh = solved.clip
        assert bundled.joint_names == fresh.joint_names and bundled.body_names == fresh.body_names
        for key in ("joint_pos", "joint_vel", "body_pos_w", "body_quat_w", "body_lin_vel_w", "body_ang_vel_w"):
            np.testing.assert_allclose(getattr(bundled, key), getattr(fresh, key), atol=1e-4, err_msg=key)


@pytest.mark.parametrize("key", sorted(SOLVED))
def test_clip_plausibility(key):
    solved, robot = SOLVED[key], {"g1": G1, "t1": T1}[key[0]]
    m = margins(SYNTH[key[0]].m, solved.clip, solved.planted, solved.feet,
                velocity_limits(robot, solved.clip.joint_names))
    assert m["limit_excess"] <= 1e-6, m
    assert m["speed_ratio"] < 1.0, m
    assert m["sink"] < 0.005, m
    assert m["slide"] < 0.01, m
    assert m["com_margin"] >= 0.01, m
    assert m["penetration"] < 0.01, m
    print(key, {k: round(v, 4) for k, v in m.items()})


def test_dance_length():
    for robot in SYNTH:
        assert 20.0 <= SOLVED[robot, "dance"].clip.duration <= 40.0


def test_kick_has_single_support():
    for robot in SYNTH:
        planted = SOLVED[robot, "kick"].planted
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
    for p in MOTIONS.glob("g1_*.npz"):
        (tmp_path / p.name).write_bytes(p.read_bytes())
    corpus = load_corpus(tmp_path, c.joint_names, c.body_names, fps=c.fps)
    assert len(corpus.names) == 4 and corpus.clip_start[0] == 0
    assert int(corpus.clip_length.sum()) == corpus.num_frames
    two = load_corpus([MOTIONS / "g1_kick.npz", MOTIONS / "g1_wave.npz"], c.joint_names, c.body_names, fps=c.fps)
    assert two.names == ("g1_kick", "g1_wave") and int(two.clip_start[1]) == c.num_frames
    with pytest.raises(MotionFormatError, match="does not exist"):
        load_corpus(tmp_path / "nope.npz", c.joint_names, c.body_names, fps=c.fps)
    with pytest.raises(MotionFormatError, match="t1_kick.*no joint"):  # a T1 clip for the G1
        load_corpus(MOTIONS / "t1_kick.npz", c.joint_names, c.body_names, fps=c.fps)


# ------------------------------------------------------------------------ converters
def assert_clips_close(a: MotionClip, b: MotionClip, atol: float) -> None:
    for key in ("joint_pos", "joint_vel", "body_pos_w", "body_quat_w", "body_lin_vel_w", "body_ang_vel_w"):
        np.testing.assert_allclose(getattr(a, key), getattr(b, key), atol=atol, err_msg=key)


def test_beyondmimic_round_trip(tmp_path):
    c = SOLVED["g1", "kick"].clip
    to_beyondmimic(c, tmp_path / "bm.npz", MODEL)
    back = from_beyondmimic(tmp_path / "bm.npz", MODEL)
    assert_clips_close(c, back, 1e-5)


def test_csv_round_trip(tmp_path):
    c = SOLVED["g1", "kick"].clip
    to_csv(c, tmp_path / "kick.csv", MODEL, root="pelvis")
    back = from_csv(tmp_path / "kick.csv", MODEL, fps=c.fps)
    assert_clips_close(c, back, 1e-5)


def test_csv_wrong_columns(tmp_path):
    (tmp_path / "bad.csv").write_text("0,0,0.8,0,0,0,1,0.1\n" * 3)
    with pytest.raises(MotionFormatError, match="columns"):
        from_csv(tmp_path / "bad.csv", MODEL, fps=50.0)
