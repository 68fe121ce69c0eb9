#!/bin/sh
# Runs in each matrix guest on this machine's root (read-only, a tmpfs on top): mounts what a
# node has, runs the job the host wrote into /mnt/matrix/job.env, leaves its exit status in
# /mnt/matrix/status and powers off. Its output is the guest's console, which the host reads.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
. /mnt/matrix/job.env
# The repository may lie under /tmp or /var/tmp, which the guest covers: keep it in view.
mkdir -p /mnt/repo
mount --bind "$MATRIX_REPO" /mnt/repo
mount -t tmpfs tmpfs /run
mount -t tmpfs tmpfs /tmp
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts
mount -t tmpfs tmpfs /dev/shm
mount -t cgroup2 cgroup2 /sys/fs/cgroup
mount -t bpf bpf /sys/fs/bpf
mount -t debugfs debugfs /sys/kernel/debug
mount -t tracefs tracefs /sys/kernel/tracing
ip link set lo up 2>/dev/null || busybox ifconfig lo 127.0.0.1 up
# The kernel's modules (the host unpacked them) where modprobe looks for them.
mkdir -p "/lib/modules/$(uname -r)"
mount --bind "$MATRIX_MODULES" "/lib/modules/$(uname -r)"
# A real block device for the block layer and O_DIRECT: the host's scratch ext4 image.
modprobe virtio_blk && modprobe ext4 && mount -t ext4 /dev/vda /var/tmp && chmod 1777 /var/tmp
mkdir -p "$MATRIX_REPO"
mount --bind /mnt/repo "$MATRIX_REPO"
# The share at the host's own path too: the tests' kernel sides leave their traces there, and
# the paths in their facts hold when the host checks them (tests/kernel/kernel_side.py).
mkdir -p "$MATRIX_SHARE"
mount --bind /mnt/matrix "$MATRIX_SHARE"
echo "matrix-guest: $(uname -r) up in $(cut -d' ' -f1 /proc/uptime) s; running: $MATRIX_COMMAND"
cd "$MATRIX_REPO"
sh -c "$MATRIX_COMMAND" </dev/null 2>&1
status=$?
echo "$status" > /mnt/matrix/status
echo "matrix-guest: exit status $status after $(cut -d' ' -f1 /proc/uptime) s"
sync
# This shell is the guest's first process: were it to exit, the kernel would panic after the
# status is written and bury the job's last lines under an oops. busybox's poweroff -f asks the
# kernel directly and does not return; the loop is there in case it should.
busybox poweroff -f
while :; do busybox sleep 60; done
