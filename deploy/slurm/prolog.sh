#!/bin/sh
# Slurm prolog (Prolog= in slurm.conf, runs as root on each node of the job): tell the node's
# ioobserve serve to record this job's trace. Never fails the job: a missing daemon is logged.
IOOBSERVE="${IOOBSERVE:-/usr/local/bin/ioobserve}"
SOCKET="${IOOBSERVE_SOCKET:-/run/ioobserve/events.sock}"
[ -n "$SLURM_JOB_ID" ] || exit 0
"$IOOBSERVE" job start "$SLURM_JOB_ID" --socket "$SOCKET" 2>&1 | logger -t ioobserve-prolog
exit 0
