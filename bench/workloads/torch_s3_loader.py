"""The reference job (torch_loader.py) with its samples in object storage: a real PyTorch
DataLoader whose Dataset.__getitem__ fetches its sample with boto3's get_object over HTTPS.

EPOCHS epochs of a DataLoader with WORKERS workers started by 'spawn' (each imports torch and
makes its own boto3 client, as on real nodes) and not kept between epochs. The objects
(`sample-00000.bin` ...) must already be in BUCKET. Prints one JSON line with what it did:
{"samples_read": N, "bytes_read": B, "seconds": S, "ended_at": epoch seconds at its end}.

Needs torch and boto3 (a scratch venv: `pip install torch==2.13.0 boto3`).
Usage: python bench/workloads/torch_s3_loader.py --endpoint https://127.0.0.1:PORT --ca CERT
       --bucket B [--samples 48 --workers 4 --epochs 2]
"""

from __future__ import annotations

import argparse
import json
import os
import time

import torch
from torch.utils.data import DataLoader, Dataset

CREDENTIALS = {"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench", "AWS_DEFAULT_REGION": "us-east-1"}


class ObjectSamples(Dataset):
    """One object per sample, fetched whole in __getitem__ by the worker's own client."""

    def __init__(self, endpoint: str, ca_file: str, bucket: str, keys: list[str]):
        self.endpoint, self.ca_file, self.bucket, self.keys = endpoint, ca_file, bucket, keys
        self._client = None

    def __len__(self) -> int:
        return len(self.keys)

    def client(self):
        """This worker's boto3 client, made on its first sample (clients do not cross processes)."""
        if self._client is None:
            import boto3

            self._client = boto3.client("s3", endpoint_url=self.endpoint, verify=self.ca_file or None)
        return self._client

    def __getitem__(self, index: int) -> torch.Tensor:
        data = self.client().get_object(Bucket=self.bucket, Key=self.keys[index])["Body"].read()
        return torch.frombuffer(bytearray(data), dtype=torch.uint8).float().mean().reshape(1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--endpoint", required=True)
    parser.add_argument("--ca", default="", help="the server's CA certificate (HTTPS)")
    parser.add_argument("--bucket", required=True)
    parser.add_argument("--samples", type=int, default=48)
    parser.add_argument("--size", type=int, default=1 << 20, help="bytes per sample object")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--epochs", type=int, default=2)
    args = parser.parse_args()
    for name, value in CREDENTIALS.items():
        os.environ.setdefault(name, value)

    keys = [f"sample-{index:05d}.bin" for index in range(args.samples)]
    started = time.monotonic()
    loader = DataLoader(ObjectSamples(args.endpoint, args.ca, args.bucket, keys), batch_size=4,
                        num_workers=args.workers, multiprocessing_context="spawn", persistent_workers=False)
    seen = 0
    for _ in range(args.epochs):
        for batch in loader:
            seen += batch.shape[0]
    print(json.dumps({"samples_read": seen, "bytes_read": seen * args.size,
                      "seconds": round(time.monotonic() - started, 3), "ended_at": time.time()}), flush=True)


if __name__ == "__main__":
    main()
