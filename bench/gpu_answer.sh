#!/usr/bin/env bash
# The default comparison of a corpus given as three files, every row to its recipe's end, on a machine
# with a GPU (issue 51), with nothing downloaded: `lmbench reproduce text --budget none`, its networks on
# CUDA (the rows' device is "auto"), and what it leaves in ONE folder $OUT (default build/gpu_answer), at
# most 7 files, none in a subfolder:
#   results.json, report.md          the comparison (written when it finishes)
#   perplexity_against_compute.png   the figure of the report
#   row_seconds.tsv                  each finished row's seconds (from results.json, else from the log)
#   run.log                          the command's output, a line per row as it finishes
#   gpu_answer.txt                   the machine, torch, the command, its exit status and wall seconds
# A run longer than $TIMEOUT seconds (default 540: under the 10 minutes a command gets on the project's
# GPU machines) is stopped, and what it has made is still copied into $OUT (on any exit: a trap); the row
# cache in $WORK keeps the finished rows, so the same command run again carries on from them.
#
#   bench/gpu_answer.sh TRAIN VALID TEST
#   OUT=answer TIMEOUT=1800 bench/gpu_answer.sh a/train.txt a/valid.txt a/test.txt
#   DEVICE=cpu QUICK=1 bench/gpu_answer.sh ...     # its tiny CPU form (the test suite's, on a tiny corpus)
# Variables: OUT, WORK (row cache, default build/gpu_answer-work), TIMEOUT, DEVICE (cuda: refused in one
# line without CUDA; cpu: the GPU hidden), JOBS (rows at once on an embedded Ray, `reproduce --jobs`:
# default 4 on cuda, the n-gram rows on the CPU while networks share the GPU; 1 on cpu), QUICK=1 (--quick:
# a small slice), NAME, PY. docs/parallel.md says
# what the machine needs (torch with CUDA; the other dependencies as wheels where no registry is reachable).
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
OUT=${OUT:-build/gpu_answer}
WORK=${WORK:-build/gpu_answer-work}
TIMEOUT=${TIMEOUT:-540}
DEVICE=${DEVICE:-cuda}
if [ "$DEVICE" = cpu ]; then JOBS=${JOBS:-1}; else JOBS=${JOBS:-4}; fi
NAME=${NAME:-gpu-answer}
if [ $# -ne 3 ]; then
    echo "gpu_answer: give the corpus as three files: bench/gpu_answer.sh TRAIN VALID TEST" >&2
    exit 2
fi
for file in "$@"; do
    [ -f "$file" ] || { echo "gpu_answer: $file is not a file: give TRAIN VALID TEST, three text files" >&2; exit 2; }
done
case "$DEVICE" in
    cuda)
        if ! "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"; then
            echo "gpu_answer: CUDA is not available to $PY's torch: run it on a machine with a GPU and a CUDA build of torch, or DEVICE=cpu" >&2
            exit 2
        fi ;;
    cpu) export CUDA_VISIBLE_DEVICES="" ;;  # the rows' device "auto" is then the CPU
    *) echo "gpu_answer: DEVICE=$DEVICE: give cuda or cpu" >&2; exit 2 ;;
esac
mkdir -p "$OUT" "$WORK"
REPORT="$WORK/report"
COMMAND=("$PY" -m lmbench_cli reproduce text --train "$1" --valid "$2" --test "$3" --name "$NAME"
         --budget none --jobs "$JOBS" --work-dir "$WORK/rows" --report-dir "$REPORT" ${QUICK:+--quick})
STARTED=$(date +%s)
STATUS="running"

collect() {  # what exists, into $OUT (also on a timeout, an error or a signal)
    trap - EXIT INT TERM
    [ -f "$REPORT/results.json" ] && cp "$REPORT/results.json" "$OUT/"
    [ -f "$REPORT/report.md" ] && cp "$REPORT/report.md" "$OUT/"
    [ -f "$REPORT/figures/perplexity_against_compute.png" ] && cp "$REPORT/figures/perplexity_against_compute.png" "$OUT/"
    "$PY" - "$OUT" <<'PYEOF'
import json, re, sys
from pathlib import Path
out = Path(sys.argv[1])
lines = ["row\tkind\tseconds\ttrain_seconds\tvalid_ppl\ttest_ppl"]
if (out / "results.json").is_file():
    for row in json.loads((out / "results.json").read_text())["rows"]:
        lines.append("\t".join(str(row.get(key, "")) for key in ("id", "kind", "seconds", "train_seconds", "valid_ppl", "test_ppl")))
else:  # stopped before the end: the rows the log saw finish
    pattern = re.compile(r"reports\.pipeline: row (\S+): valid (\S+) test (\S+) \((\S+) s\)")
    text = (out / "run.log").read_text(errors="replace") if (out / "run.log").is_file() else ""
    for name, valid, test, seconds in pattern.findall(text):
        lines.append(f"{name}\t\t{seconds}\t\t{valid}\t{test}")
(out / "row_seconds.tsv").write_text("\n".join(lines) + "\n")
PYEOF
    {
        echo "status: $STATUS"
        echo "wall_seconds: $(( $(date +%s) - STARTED ))"
        echo "timeout_seconds: $TIMEOUT"
        echo "device: $DEVICE"
        echo "command: ${COMMAND[*]}"
        "$PY" -c "import torch; print('torch:', torch.__version__, '| cuda:', torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'none')" 2>&1
        echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo 'not a git checkout')"
    } > "$OUT/gpu_answer.txt"
    echo "gpu_answer: $STATUS; files in $OUT: $(cd "$OUT" && ls | tr '\n' ' ')" >&2
}
# in the background, so that a signal to this script is handled at once (bash runs a trap only after the
# foreground command it waits for has ended), the comparison then stopped and its files collected
timeout --signal=TERM --kill-after=20 "$TIMEOUT" "${COMMAND[@]}" > "$OUT/run.log" 2>&1 &
CHILD=$!
trap 'STATUS="stopped by a signal"; kill -TERM $CHILD 2>/dev/null; wait $CHILD; collect; exit 143' INT TERM
trap collect EXIT
wait $CHILD
RC=$?
case $RC in
    0) STATUS="finished" ;;
    124|137) STATUS="timed out after $TIMEOUT s (the finished rows are in $WORK/rows: run it again to carry on)" ;;
    *) STATUS="failed with exit status $RC (see run.log)" ;;
esac
collect
exit $RC
