#!/usr/bin/python3
"""Loads damaged copies of a real compiled artifact with kiln-run.

Truncations at every 1/64th of the file must each exit 1 with "kiln-run: error: ... corrupt";
random byte flips (fixed seed) must exit 0 (the damage hit something harmless, such as padding)
or 1 with an error message: never a crash (a signal, or exit 2). A flip inside a constant's bytes
(the weights) must exit 1 naming the damaged constant: constants are checksummed (format 4).
"""
import argparse
import os
import random
import struct
import subprocess
import sys


def data_segment(data):
    """(offset, size) of a format-4 file's data segment, read from its FileHeader FlatBuffer
    (artifact/kiln.fbs: field 1 data_offset, field 2 data_size)."""
    u32 = lambda at: struct.unpack_from("<I", data, at)[0]
    table = u32(0)
    vtable = table - struct.unpack_from("<i", data, table)[0]
    field = lambda i: struct.unpack_from("<H", data, vtable + 4 + 2 * i)[0]
    return (struct.unpack_from("<Q", data, table + field(1))[0], struct.unpack_from("<Q", data, table + field(2))[0])


def run_kiln(kiln_run, art):
    proc = subprocess.run([kiln_run, art, "--dim", "N=2"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, errors="replace")
    return proc.returncode, proc.stderr


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kilnc", required=True)
    ap.add_argument("--kiln-run", required=True)
    ap.add_argument("--graph", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--flips", type=int, default=1000)
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    art = os.path.join(args.work, "model.kiln")
    subprocess.run([args.kilnc, args.graph, "-o", art], check=True)
    rc, err = run_kiln(args.kiln_run, art)
    if rc != 0:
        print(f"FAIL: the undamaged artifact does not run: {err}")
        return 1
    with open(art, "rb") as f:
        data = f.read()
    damaged = os.path.join(args.work, "damaged.kiln")
    failures = 0

    for k in range(64):
        with open(damaged, "wb") as f:
            f.write(data[: len(data) * k // 64])
        rc, err = run_kiln(args.kiln_run, damaged)
        if rc != 1 or not err.startswith("kiln-run: error: ") or ("corrupt" not in err and "not a Kiln artifact" not in err):
            print(f"FAIL truncation {k}/64: exit {rc}: {err.strip()}")
            failures += 1

    rng = random.Random(1234)
    outcomes = {0: 0, 1: 0}
    for i in range(args.flips):
        buf = bytearray(data)
        # Half the flips land in the first 4 KiB and the last 64 KiB, where the tables are
        # (the weights lie in between), so the structure is hit often.
        for _ in range(rng.randint(1, 4)):
            if rng.random() < 0.5:
                at = rng.randrange(min(4096, len(buf))) if rng.random() < 0.5 else rng.randrange(max(0, len(buf) - 65536), len(buf))
            else:
                at = rng.randrange(len(buf))
            buf[at] ^= 1 << rng.randrange(8)
        with open(damaged, "wb") as f:
            f.write(buf)
        rc, err = run_kiln(args.kiln_run, damaged)
        if rc not in (0, 1) or (rc == 1 and not err.startswith("kiln-run: ")):
            print(f"FAIL flip run {i}: exit {rc}: {err.strip()[:500]}")
            failures += 1
        else:
            outcomes[rc] += 1
    print(f"flips: {outcomes[0]} ran, {outcomes[1]} rejected; {failures} failures")

    # Flips inside the weights: every one is a load error naming the damaged constant.
    offset, size = data_segment(data)
    if size < 1024:
        print(f"FAIL: the data segment of {art} holds only {size} bytes; expected the weights there")
        return 1
    for i in range(20):
        buf = bytearray(data)
        buf[offset + rng.randrange(size)] ^= 1 << rng.randrange(8)
        with open(damaged, "wb") as f:
            f.write(buf)
        rc, err = run_kiln(args.kiln_run, damaged)
        # The padding between constants is < 64 bytes each against 800 KB of weights: with the
        # fixed seed every flip lands in a constant.
        if rc != 1 or "its bytes are damaged (checksum mismatch)" not in err:
            print(f"FAIL weight flip {i}: exit {rc}: {err.strip()[:500]}")
            failures += 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
