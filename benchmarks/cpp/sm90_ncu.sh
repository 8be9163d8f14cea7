#!/usr/bin/env bash
# ncu on the GPU machine: our sm90 kernel (the variant harness, one shape, one variant) and, when
# ncu catches it, cuDNN's kernel for the same shape (PyTorch SDPA). Writes a summary (details page)
# and the per-SASS-line source view with stall reasons, as CSV, for each, into $OUT/ncu.tgz.
# benchmarks/cpp/sm90_ncu_stalls.py sums the source views by stall reason and opcode.
# Usage: benchmarks/cpp/sm90_ncu.sh [hdim=128] [seqlen=8192] [causal=0] [variant...]
# Binaries as for scripts/device_sm90.sh (.sm90-device/flashattn_sm90_variants), or the harness
# SM90_VARIANTS_BIN names (scripts/device_session.sh measure: the build's).
set -u
hd=${1:-128}; sl=${2:-8192}; ca=${3:-0}; shift 3 2>/dev/null
variants=("$@"); [ ${#variants[@]} -eq 0 ] && variants=(n128_s2_dyn)
OUT=${OUT:-/tmp/sm90-out}
D=/tmp/sm90-ncu
mkdir -p "$OUT" "$D"
cd "$(dirname "$0")/../.."
export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}:$PWD/.sm90-device/lib
BIN=${SM90_VARIANTS_BIN:-.sm90-device/flashattn_sm90_variants}
NCU="ncu --clock-control none --set full --import-source yes"
export_rep() {  # name
  ncu -i "$D/$1.ncu-rep" --page details --csv > "$D/$1_details.csv" 2>&1
  ncu -i "$D/$1.ncu-rep" --page source --csv --print-source sass > "$D/$1_source.csv" 2>&1
  ncu -i "$D/$1.ncu-rep" --page details --print-details all > "$D/$1_details.txt" 2>&1
  echo "== $1"
  grep -E "Duration|Compute \(SM\) Throughput|Issue Slots Busy|Executed Ipc Active|Registers Per|Warp Cycles Per Issued|One or More Eligible|No Eligible|Tensor" "$D/$1_details.txt" | head -20
}
for v in "${variants[@]}"; do
  timeout 150 $NCU -k regex:forward_kernel --launch-skip 1 -c 1 -o "$D/ours_$v" -f "$BIN" 1 1 "$hd" "$sl" "$ca" "$v" \
    > "$D/ours_$v.log" 2>&1
  echo "ncu ours $v exit $?"
  export_rep "ours_$v"
done
timeout 150 $NCU -k 'regex:sdpa|fmha|flash|fprop|attn' --launch-skip 1 -c 1 -o "$D/cudnn" -f python3 benchmarks/cpp/sm90_ncu_peer.py "$hd" "$sl" "$ca" \
  > "$D/cudnn.log" 2>&1
echo "ncu cudnn exit $?"
[ -f "$D/cudnn.ncu-rep" ] && export_rep cudnn || tail -5 "$D/cudnn.log"
rm -f "$D"/*.ncu-rep.tmp
tar -czf "$OUT/ncu.tgz" -C "$D" --exclude='*.ncu-rep' . 2>/dev/null
ls -la "$D" | head -20
