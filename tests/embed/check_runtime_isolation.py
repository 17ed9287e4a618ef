#!/usr/bin/env python3
"""Checks that the Kiln runtime stays separate from the compiler.

1. No source under runtime/ includes a compiler header (frontend/, passes/, codegen/) or a
   compiler library's header (shaderc, NVRTC, SPIRV-Tools, glslang).
2. kiln_runtime's link closure (computed by CMake, passed with --links) names no compiler
   library (kiln_frontend, kiln_passes, kiln_codegen*, shaderc, nvrtc, SPIRV-Tools).
3. The embed binary, which links only kiln_runtime, holds no symbol of the compiler's
   namespaces (kiln::frontend, kiln::passes, kiln::codegen) or of shaderc/NVRTC.
4. The GPU APIs are loaded at run time only: kiln_runtime includes no CUDA/cuBLAS header and
   links no CUDA library (driver, runtime, cuBLAS, NVRTC); the embed binary needs no GPU
   library (DT_NEEDED: libcuda, libcudart, libcublas*, libnvrtc, libOpenCL, libvulkan) and
   imports no cu*/cublas*/nvrtc* symbol, and it does contain the CUDA driver (dlopen'ed).
5. The runtime reads artifacts but never writes them: its link closure names no artifact
   writer library (kiln_artifact_writer, or kiln_artifact, which is reader and writer), no
   runtime source includes artifact/writer.h, and the embed binary holds no writer symbol
   (kiln::artifact::write_artifact*) while it does hold the reader.
Exit status 0 when all hold; 1 with every violation printed otherwise.
"""
import argparse
import os
import re
import subprocess
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]', re.M)
FORBIDDEN_INCLUDE = re.compile(r'^(frontend|passes|codegen)/|^shaderc/|nvrtc|^spirv-tools/|^glslang/'
                               r'|(^|/)(cuda|cuda_runtime|cuda_runtime_api|cublas|cublas_v2|cublas_api|cublasLt)\.h$')
FORBIDDEN_LINK = re.compile(r'kiln_frontend|kiln_passes|kiln_codegen|shaderc|nvrtc|SPIRV-Tools|glslang'
                            r'|CUDA::|cublas|cudart|libcuda\.|(^|[/ ])-?l?cuda$', re.I)
FORBIDDEN_SYMBOL = re.compile(r'kiln::(frontend|passes|codegen)::|\bshaderc_|\bnvrtc')
FORBIDDEN_NEEDED = re.compile(r'libcuda\.|libcudart|libcublas|libnvrtc|libOpenCL|libvulkan')
FORBIDDEN_IMPORT = re.compile(r'^(cu[A-Z]\w*|cublas\w*|nvrtc\w*)$')
WRITER_INCLUDE = re.compile(r'^artifact/writer\.h$')
WRITER_LINK = re.compile(r'^(kiln_artifact_writer|kiln_artifact)$')
WRITER_SYMBOL = re.compile(r'kiln::artifact::write_artifact')


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
                if WRITER_INCLUDE.search(match.group(1)):
                    line = text.count('\n', 0, match.start()) + 1
                    problems.append(f'{path}:{line}: the runtime includes the artifact writer '
                                    f'"{match.group(1)}"')
    if checked == 0:
        problems.append(f'no sources found under {args.runtime_dir}')

    for lib in filter(None, args.links.split(',')):
        if FORBIDDEN_LINK.search(lib):
            problems.append(f'kiln_runtime links compiler library {lib}')
        if WRITER_LINK.search(lib):
            problems.append(f'kiln_runtime links the artifact writer ({lib}); link kiln_artifact_reader')
    if args.links and 'kiln_artifact_reader' not in args.links.split(','):
        problems.append('kiln_runtime does not link kiln_artifact_reader (the link closure is not what this '
                        'check expects)')

    nm = subprocess.run(['nm', '-C', args.binary], capture_output=True, text=True)
    if nm.returncode != 0:
        problems.append(f'nm {args.binary} failed: {nm.stderr.strip()}')
    else:
        symbols = [l for l in nm.stdout.splitlines() if FORBIDDEN_SYMBOL.search(l)]
        if not any('kiln_session_run' in l for l in nm.stdout.splitlines()):
            problems.append(f'{args.binary} does not contain the C API (nm finds no kiln_session_run)')
        for s in symbols[:20]:
            problems.append(f'{args.binary} contains compiler code: {s}')
        writer = [l for l in nm.stdout.splitlines() if WRITER_SYMBOL.search(l)]
        for s in writer[:20]:
            problems.append(f'{args.binary} contains artifact writer code: {s}')
        if not any('kiln::artifact::read_artifact' in l for l in nm.stdout.splitlines()):
            problems.append(f'{args.binary} does not contain the artifact reader (nm finds no '
                            f'kiln::artifact::read_artifact)')

    # 4. GPU libraries are dlopen'ed, never linked.
    readelf = subprocess.run(['readelf', '-d', args.binary], capture_output=True, text=True)
    if readelf.returncode != 0:
        problems.append(f'readelf -d {args.binary} failed: {readelf.stderr.strip()}')
    else:
        for lib in re.findall(r'\(NEEDED\)\s+Shared library: \[([^\]]+)\]', readelf.stdout):
            if FORBIDDEN_NEEDED.search(lib):
                problems.append(f'{args.binary} is linked against GPU library {lib} (it must be dlopen\'ed)')
    imports = subprocess.run(['nm', '-D', '--undefined-only', args.binary], capture_output=True, text=True)
    if imports.returncode != 0:
        problems.append(f'nm -D {args.binary} failed: {imports.stderr.strip()}')
    else:
        for line in imports.stdout.splitlines():
            name = line.split()[-1].split('@')[0] if line.split() else ''
            if FORBIDDEN_IMPORT.match(name):
                problems.append(f'{args.binary} imports GPU API symbol {name} (it must be dlsym\'ed)')
    if nm.returncode == 0 and 'kiln::runtime::cuda::create_cuda_driver' not in nm.stdout:
        problems.append(f'{args.binary} does not contain the CUDA driver (kiln::runtime::cuda::create_cuda_driver)')

    for p in problems:
        print('error:', p)
    if problems:
        return 1
    print(f'ok: {checked} runtime sources include no compiler or GPU API header; links: {args.links}; '
          f'{os.path.basename(args.binary)} holds no compiler symbol, links no GPU library and '
          f'holds the CUDA driver and the artifact reader but no artifact writer')
    return 0


if __name__ == '__main__':
    sys.exit(main())
