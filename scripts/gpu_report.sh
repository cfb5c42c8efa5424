#!/usr/bin/env bash
# The GPU figures of docs/performance.md, on a machine with a CUDA GPU and the warp extra
# installed (torch's CUDA build, mujoco-warp, warp-lang). Writes eight files into $1 (default
# gpu_report/): device.txt, bench.txt and the bench JSONs, train.txt, tests.txt; the training
# run's logs go to $LOGS. Each part runs on its own under a time limit (seconds), most wanted
# first, so that a failing or slow one leaves the others' figures.
#
#   bash scripts/gpu_report.sh out/
#   DEVICE=cpu LANES=8 MINUTES=0.3 bash scripts/gpu_report.sh out/   # the same steps on Warp's CPU device
set -u
out=${1:-gpu_report}
device=${DEVICE:-cuda}
lanes=${LANES:-4096 16384}
minutes=${MINUTES:-2}
logs=${LOGS:-$out/logs}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
part() {  # part SECONDS COMMAND...: COMMAND under a time limit, saying how long it took and how it ended
  local limit=$1 start=$SECONDS
  shift
  timeout -k 5 "$limit" "$@"
  echo "[$* : exit $? after $((SECONDS - start)) s]"
}
part 60 python - <<'EOF' 2>&1 | tee "$out/device.txt"
import torch, warp as wp
print("torch", torch.__version__, "cuda", torch.version.cuda,
      torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no CUDA device")
print("warp", wp.__version__, wp.get_cuda_device_count(), "CUDA devices")
EOF
bench() {  # bench TASK compile|no-compile: env against raw mujoco_warp stepping of the same model and lanes
  # shellcheck disable=SC2086
  part "${BENCH_S:-240}" python -m motrix_gym bench "Motrix/$1-v0" --device "$device" --backend warp \
    --num-envs $lanes --steps 20 --repeats 3 "--$2" --json "$out/bench_$1_$2.json" 2>&1 | tee -a "$out/bench.txt"
}
bench G1WbtDance compile
bench G1WalkFlat compile
# a short PPO run, simulation, runtime and policy on the device
part "${TRAIN_S:-300}" python -m motrix_gym train Motrix/Go1WalkFlat-v0 --device "$device" --num-envs "${lanes%% *}" \
  --minutes "$minutes" --eval-lanes 64 --log-dir "$logs" 2>&1 | tail -n 14 | tee "$out/train.txt"
# parity with the C backend and the device checks, on this device
part "${TESTS_S:-300}" python -m pytest -q -p no:cacheprovider tests/test_warp.py -k "$device" 2>&1 | tee "$out/tests.txt"
bench G1WbtDance no-compile
bench G1WalkFlat no-compile
