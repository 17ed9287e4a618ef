#!/usr/bin/env python3
"""Runs one golden test file the way LLVM's lit does, in miniature.

Every line of the form `# RUN: <command>` in the file is a shell command (run with bash, with
pipefail, from the file's directory). Before running, these are substituted:
  %s         the test file's path
  %t         a scratch path unique to this test file (a file name prefix in a temp directory)
  %kilnc     the kilnc binary          (--kilnc)
  %FileCheck LLVM FileCheck            (--filecheck)
  %not       LLVM's `not` (inverts an exit status; exit 1 expected from kilnc on user errors)
A RUN line ending in a backslash continues on the next RUN line. The test passes when every
command exits with status 0; otherwise the failing command and its output are printed.
"""
import argparse
import os
import subprocess
import sys
import tempfile


def read_run_lines(path):
    commands, pending = [], ""
    with open(path, encoding="utf-8") as f:
        for line in f:
            stripped = line.strip()
            marker = "RUN:"
            if not stripped.startswith("#") or marker not in stripped:
                continue
            text = stripped.split(marker, 1)[1].strip()
            if text.endswith("\\"):
                pending += text[:-1] + " "
                continue
            commands.append(pending + text)
            pending = ""
    if pending:
        commands.append(pending)
    return commands


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kilnc", required=True)
    parser.add_argument("--filecheck", required=True)
    parser.add_argument("--not-tool", default="/usr/lib/llvm-14/bin/not")
    parser.add_argument("test")
    args = parser.parse_args()

    test = os.path.abspath(args.test)
    commands = read_run_lines(test)
    if not commands:
        print(f"{test}: no RUN lines", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory(prefix="kiln-golden-") as scratch:
        scratch_prefix = os.path.join(scratch, os.path.basename(test))
        for number, command in enumerate(commands, 1):
            # Longer names first so %s does not eat the start of another substitution.
            expanded = (command.replace("%kilnc", args.kilnc)
                        .replace("%FileCheck", args.filecheck)
                        .replace("%not", args.not_tool)
                        .replace("%s", test)
                        .replace("%t", scratch_prefix))
            result = subprocess.run(["bash", "-o", "pipefail", "-c", expanded],
                                    cwd=os.path.dirname(test), capture_output=True, text=True)
            if result.returncode != 0:
                print(f"FAIL: {test} RUN line {number} exited with {result.returncode}:")
                print(f"  {expanded}")
                print("--- stdout ---\n" + result.stdout)
                print("--- stderr ---\n" + result.stderr)
                return 1
    print(f"PASS: {test} ({len(commands)} RUN lines)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
