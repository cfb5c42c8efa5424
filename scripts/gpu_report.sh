#!/usr/bin/env bash
# The GPU figures of docs/performance.md, on a machine with a CUDA GPU and the warp extra
# installed (torch's CUDA build, mujoco-warp, warp-lang). Writes logs and JSON into $1 (default
# gpu_report/). Each part runs on its own, so that a failing one leaves the others' figures.
#
#   bash scripts/gpu_report.sh out/
#   DEVICE=cpu LANES=8 MINUTES=0.3 bash scripts/gpu_report.sh out/   # the same steps on Warp's CPU device
set -u
out=${1:-gpu_report}
device=${DEVICE:-cuda}
lanes=${LANES:-4096 16384}
minutes=${MINUTES:-3}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
python - <<'EOF' 2>&1 | tee "$out/device.txt"
import torch, warp as wp
print("torch", torch.__version__, "cuda", torch.version.cuda,
      torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no CUDA device")
print("warp", wp.__version__, wp.get_cuda_device_count(), "CUDA devices")
EOF
# parity with the C backend and the device checks, on this device
python -m pytest -q -p no:cacheprovider tests/test_warp.py -k "$device" 2>&1 | tee "$out/tests.txt"
# env against raw mujoco_warp stepping of the same model and lanes; eager, then compiled
for task in G1WbtDance G1WalkFlat; do
  for c in no-compile compile; do
    # shellcheck disable=SC2086
    python -m motrix_gym bench "Motrix/$task-v0" --device "$device" --backend warp --num-envs $lanes \
      --steps 20 --repeats 3 "--$c" --json "$out/bench_${task}_$c.json" 2>&1 | tee -a "$out/bench.txt"
  done
done
# a short PPO run, simulation, runtime and policy on the device
python -m motrix_gym train Motrix/Go1WalkFlat-v0 --device "$device" --num-envs "${lanes%% *}" --minutes "$minutes" \
  --eval-lanes 64 --log-dir "$out/logs" 2>&1 | tail -n 12 | tee "$out/train.txt"
