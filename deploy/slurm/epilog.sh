#!/bin/sh
# Slurm epilog (Epilog= in slurm.conf): the job ended, so its trace is closed. Never fails the job.
IOOBSERVE="${IOOBSERVE:-/usr/local/bin/ioobserve}"
SOCKET="${IOOBSERVE_SOCKET:-/run/ioobserve/events.sock}"
[ -n "$SLURM_JOB_ID" ] || exit 0
"$IOOBSERVE" job stop "$SLURM_JOB_ID" --socket "$SOCKET" 2>&1 | logger -t ioobserve-epilog
exit 0
