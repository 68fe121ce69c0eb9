"""A process tree for filter tests: waits for a line on stdin, then reads FILE, forks a
child that reads it and forks a grandchild that reads it too. With --cgroup-procs it first
moves itself into that cgroup. Prints READY, then {"pids": [...]} when done."""

from __future__ import annotations

import argparse
import json
import os
import sys

parser = argparse.ArgumentParser()
parser.add_argument("file")
parser.add_argument("--cgroup-procs", default=None)
parser.add_argument("--stat", default=None, help="also stat this path")
parser.add_argument("--comm", default=None, help="rename this process (and so its children) first")
args = parser.parse_args()

if args.comm:
    with open("/proc/self/comm", "w") as comm:
        comm.write(args.comm)
if args.cgroup_procs:
    with open(args.cgroup_procs, "w") as procs:
        procs.write(str(os.getpid()))
print("READY", flush=True)
sys.stdin.readline()


def read_once() -> None:
    fd = os.open(args.file, os.O_RDONLY)
    os.read(fd, 4096)
    os.close(fd)
    if args.stat:
        try:
            os.stat(args.stat)
        except FileNotFoundError:
            pass


read_once()
r, w = os.pipe()
child = os.fork()
if child == 0:
    read_once()
    grandchild = os.fork()
    if grandchild == 0:
        read_once()
        os._exit(0)
    os.waitpid(grandchild, 0)
    os.write(w, str(grandchild).encode())
    os._exit(0)
os.waitpid(child, 0)
grandchild = int(os.read(r, 32))
print(json.dumps({"pids": [os.getpid(), child, grandchild]}), flush=True)
