#!/usr/bin/env bash
# The device checks of a session lent a GPU, as one prepared command (at most about 9.5 minutes: run it with timeout_s 590):
#   bash benchmarks/gpu_session.sh OUTDIR            (on the GPU machine: OUTDIR=$OUT/g)
#   bash benchmarks/gpu_session.sh OUTDIR cpu 30     (here: a smoke run; most steps time out)
# 1. benchmarks/gpu_check.py (every algorithm on CUDA against its CPU reference, ResNet-18-GN
#    rounds, ViT-S/16 features, paper-scale costs);
# 2. the CIFAR entries' GPU paths the issues name, a few rounds each, on random-pixel files in
#    CIFAR-10's layout (benchmarks/random_cifar10.py; CIFAR-10 itself is on neither machine):
#    FedLADA Fig. 2 at the paper's scale for FedLADA, FedCM, SCAFFOLD, FedAvg and LocalAdam
#    (ResNet-18-GN, 100 clients, 10 a round, 5 local epochs of batch 50: --full's settings at 3
#    rounds), Fed-LAMB Figs. 3-4 (both models, 2 rounds) and Fed-EF Figs. 6-7 (p = 0.1,
#    2 rounds). Their seconds a round size the real runs; their accuracies mean nothing.
# Each step has its own time limit; summary.txt gets one line per step (exit code, seconds).
set -u
O=${1:?usage: gpu_session.sh OUTDIR [DEVICE [IMAGES_PER_BATCH]]}
DEV=${2:-cuda}; PER=${3:-10000}
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1
mkdir -p "$O"
EXTRA=(); TINY=()
if [ "$DEV" = cpu ]; then EXTRA=(--cpu-ok); TINY=(--tiny); fi
{ date -u; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1
  python3 -c "import sys, torch; print(sys.version.split()[0], torch.__version__, torch.cuda.is_available())"
  nproc; } > "$O/env.txt" 2>&1
DATA=$(mktemp -d); RES=$(mktemp -d)
python3 benchmarks/random_cifar10.py "$DATA" --per-batch "$PER" > /dev/null
step() {
    local name=$1 limit=$2; shift 2
    local start; start=$(date +%s.%N)
    timeout -k 20 "$limit" "$@" > "$O/$name.log" 2>&1; local rc=$?
    echo "$name rc=$rc seconds=$(python3 -c "print(round($(date +%s.%N) - $start, 1))")" | tee -a "$O/summary.txt"
}
COMMON=(--data-dir "$DATA" --device "$DEV" --seeds 1 --out "$RES/results" --figures "$RES/figures" --checkpoint-every 0)
step gpu_check 280 python3 benchmarks/gpu_check.py --device "$DEV" "${TINY[@]}"
step fedlada_fig2 100 python3 -m reproduce.fedlada_fig2 "${COMMON[@]}" --dataset cifar10 --model resnet18 \
    --local-epochs 5 --paper-lr --eval-every 3 --eval-train-samples 10000 --test-samples 0 --rounds 3 \
    --methods fedlada,fedcm,scaffold,fedavg,localadam
step fedlamb_cifar 60 python3 -m reproduce.fedlamb_cifar "${COMMON[@]}" --rounds 2 --eval-every 2 "${EXTRA[@]}"
step fedef_cifar 60 python3 -m reproduce.fedef_cifar "${COMMON[@]}" --rounds 2 --ps 0.1 --eval-every 2 "${EXTRA[@]}"
tar czf "$O/records.tgz" -C "$RES" results 2>/dev/null
rm -rf "$DATA" "$RES"
