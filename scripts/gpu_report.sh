#!/usr/bin/env bash
# The GPU figures of docs/performance.md, on a machine with a CUDA GPU and the warp extra
# installed (torch's CUDA build, mujoco-warp, warp-lang). Writes JSON and logs into $1 (default
# gpu_report/). Each part runs on its own, so that a failing one leaves the others' figures.
#
#   bash scripts/gpu_report.sh out/
set -u
out=${1:-gpu_report}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
python - <<'EOF' 2>&1 | tee "$out/device.txt"
import torch, warp as wp
print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.get_device_name(0))
print("warp", wp.__version__, wp.get_cuda_device_count(), "CUDA devices")
EOF
# parity with the C backend, the device tests and finite steps, on the GPU
python -m pytest -q -p no:cacheprovider tests/test_warp.py -m "slow or not slow" -k cuda 2>&1 | tee "$out/tests.txt"
# env against raw mujoco_warp stepping of the same model and lanes; eager, then compiled
for task in G1WbtDance G1WalkFlat; do
  for c in --no-compile --compile; do
    python -m motrix_gym bench "Motrix/$task-v0" --device cuda --num-envs 4096 16384 --steps 20 --repeats 3 $c \
      --json "$out/bench_${task}${c#-}.json" 2>&1 | tee -a "$out/bench.txt"
  done
done
# a short PPO run, everything on the GPU
python -m motrix_gym train Motrix/Go1WalkFlat-v0 --device cuda --num-envs 4096 --minutes 3 --log-dir "$out/logs" \
  2>&1 | tail -n 20 | tee "$out/train.txt"
