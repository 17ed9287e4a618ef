#!/usr/bin/env python3
"""Checks that the Kiln runtime stays separate from the compiler.

1. No source under runtime/ includes a compiler header (frontend/, passes/, codegen/) or a
   compiler library's header (shaderc, NVRTC, SPIRV-Tools, glslang).
2. kiln_runtime's link closure (computed by CMake, passed with --links) names no compiler
   library (kiln_frontend, kiln_passes, kiln_codegen*, shaderc, nvrtc, SPIRV-Tools).
3. The embed binary, which links only kiln_runtime, holds no symbol of the compiler's
   namespaces (kiln::frontend, kiln::passes, kiln::codegen) or of shaderc/NVRTC.
Exit status 0 when all hold; 1 with every violation printed otherwise.
"""
import argparse
import os
import re
import subprocess
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]', re.M)
FORBIDDEN_INCLUDE = re.compile(r'^(frontend|passes|codegen)/|^shaderc/|nvrtc|^spirv-tools/|^glslang/')
FORBIDDEN_LINK = re.compile(r'kiln_frontend|kiln_passes|kiln_codegen|shaderc|nvrtc|SPIRV-Tools|glslang',
                            re.I)
FORBIDDEN_SYMBOL = re.compile(r'kiln::(frontend|passes|codegen)::|\bshaderc_|\bnvrtc')


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument('--runtime-dir', required=True)
    parser.add_argument('--binary', required=True)
    parser.add_argument('--links', default='')
    args = parser.parse_args()
    problems = []

    checked = 0
    for root, _, files in os.walk(args.runtime_dir):
        for name in sorted(files):
            if not name.endswith(('.h', '.hpp', '.cpp', '.c', '.inc')):
                continue
            path = os.path.join(root, name)
            checked += 1
            with open(path, encoding='utf-8', errors='replace') as f:
                text = f.read()
            for match in INCLUDE.finditer(text):
                if FORBIDDEN_INCLUDE.search(match.group(1)):
                    line = text.count('\n', 0, match.start()) + 1
                    problems.append(f'{path}:{line}: the runtime includes compiler header '
                                    f'"{match.group(1)}"')
    if checked == 0:
        problems.append(f'no sources found under {args.runtime_dir}')

    for lib in filter(None, args.links.split(',')):
        if FORBIDDEN_LINK.search(lib):
            problems.append(f'kiln_runtime links compiler library {lib}')

    nm = subprocess.run(['nm', '-C', args.binary], capture_output=True, text=True)
    if nm.returncode != 0:
        problems.append(f'nm {args.binary} failed: {nm.stderr.strip()}')
    else:
        symbols = [l for l in nm.stdout.splitlines() if FORBIDDEN_SYMBOL.search(l)]
        if not any('kiln_session_run' in l for l in nm.stdout.splitlines()):
            problems.append(f'{args.binary} does not contain the C API (nm finds no kiln_session_run)')
        for s in symbols[:20]:
            problems.append(f'{args.binary} contains compiler code: {s}')

    for p in problems:
        print('error:', p)
    if problems:
        return 1
    print(f'ok: {checked} runtime sources include no compiler header; links: {args.links}; '
          f'{os.path.basename(args.binary)} holds no compiler symbol')
    return 0


if __name__ == '__main__':
    sys.exit(main())
