#!/bin/bash
# A seed sweep as a Slurm job array: one array task per shard. `--shard
# auto` reads SLURM_ARRAY_TASK_ID, SLURM_ARRAY_TASK_MIN and
# SLURM_ARRAY_TASK_COUNT, so any range such as --array=1-8 works (task
# `MIN + i` runs shard i+1 of COUNT); id lists like --array=1,3,7 do not.
#
#     cargo build --profile sweep -p msp-sim       # on a shared filesystem
#     mkdir -p out && sbatch deploy/slurm-sweep.sh
#     # when every task has ended:
#     target/sweep/msp-sim merge out/shard-*.json
#
# Or chain the merge: sbatch --dependency=afterany:<array job id> --wrap
# 'target/sweep/msp-sim merge out/shard-*.json'. msp-sim merge refuses
# a missing, repeated or overlapping shard (exit 2), exits 1 on a
# violation and 3 on a coverage shortfall.
#
#SBATCH --job-name=msp-sim-sweep
#SBATCH --array=0-7
#SBATCH --cpus-per-task=2
#SBATCH --mem=2G
#SBATCH --time=02:00:00
#SBATCH --output=out/slurm-%A_%a.log

set -u
MSP_SIM=${MSP_SIM:-target/sweep/msp-sim}
SEEDS=${SEEDS:-0..10000}
SCENARIO=${SCENARIO:-mixed}

# Written under a temporary name, renamed when done: a half-written summary
# is never merged. The exit code (1 on a violation) is the task's.
tmp="out/shard-${SLURM_ARRAY_TASK_ID}.json.tmp"
"$MSP_SIM" run --scenario "$SCENARIO" --seeds "$SEEDS" --shard auto \
    --jobs "${SLURM_CPUS_PER_TASK:-1}" --json > "$tmp"
rc=$?
mv "$tmp" "out/shard-${SLURM_ARRAY_TASK_ID}.json"
exit $rc
