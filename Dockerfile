# syntax=docker/dockerfile:1
#
# The kiln-serve container image: kiln-serve and kilnc on Debian 12.
#
#   docker build -t kiln-serve .
#   docker run --rm -p 8000:8000 -p 8001:8001 -p 8002:8002 -v $PWD/models:/models kiln-serve
#   docker run --rm --gpus all -p 8000-8002:8000-8002 -v $PWD/models:/models kiln-serve   # CUDA
#
# This file is at the repository root, not in docker/, so that a plain `docker build .` finds it
# and the root .dockerignore (build folders, .venv, gpu-bundle) applies to the context it sends;
# the build needs the whole source tree as its context anyway.
#
# CUDA: nothing of CUDA is installed or linked. Kiln's runtime opens the driver (libcuda.so.1)
# with dlopen when it lists devices, so the same image runs on CPUs (lavapipe, PoCL, the reference
# interpreter) and, started with the NVIDIA container toolkit (`--gpus`, or the Kubernetes device
# plugin), on NVIDIA GPUs, whose driver the toolkit mounts into the container. cuBLASLt and cuDNN
# are optional and are not mounted by the toolkit: see docs/serving.md ("The container image").
#
# kilnc here has no cuda target (the CUDA toolkit's NVRTC is not in the build stage): it compiles
# for vulkan and opencl. Compile CUDA artifacts with a kilnc built where the CUDA toolkit is
# installed; the image's kiln-serve runs them.

# ---- build stage ------------------------------------------------------------------------------
FROM debian:12 AS build

# The build dependencies of kilnc and kiln-serve, from scripts/setup.sh's list without what only
# the tests, fuzzers and Python package need (doctest, clang, PyTorch, the .venv from PyPI):
# setup.sh itself is not run because it installs those too (PyTorch alone is gigabytes).
# Plus kiln-serve's own: gRPC with its protoc plugin, protobuf and cpp-httplib.
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      build-essential cmake ninja-build pkg-config python3 \
      libcli11-dev flatbuffers-compiler libflatbuffers-dev nlohmann-json3-dev \
      libssl-dev libsodium-dev \
      opencl-headers ocl-icd-opencl-dev \
      libvulkan-dev glslc libshaderc-dev glslang-dev spirv-tools \
      libonnx-dev libprotobuf-dev protobuf-compiler \
      libgrpc++-dev protobuf-compiler-grpc libcpp-httplib-dev \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /src
COPY . .

# Tests, fuzzers and the Python package are not built (the last is skipped by itself without
# python3-dev). Building the kiln-serve target fails when CMake found no gRPC or cpp-httplib
# (serve/CMakeLists.txt then defines no such target), so a broken image cannot be produced.
RUN cmake -S . -B /build -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DKILN_BUILD_TESTS=OFF -DKILN_BUILD_FUZZERS=OFF \
 && cmake --build /build --target kiln-serve kilnc \
 && strip /build/bin/kiln-serve /build/bin/kilnc \
 && /build/bin/kilnc --version

# ---- runtime stage ----------------------------------------------------------------------------
FROM debian:12

# Only the shared libraries the two binaries link (ldd: gRPC, protobuf, cpp-httplib, libsodium;
# kilnc adds ONNX and OpenSSL's libcrypto), the loaders Kiln opens with dlopen (Vulkan, OpenCL)
# with Mesa's lavapipe and PoCL as CPU devices, and curl for the HEALTHCHECK.
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      libgrpc++1.51 libprotobuf32 libcpp-httplib0.11 libsodium23 \
      libonnx1 libssl3 \
      libvulkan1 mesa-vulkan-drivers \
      ocl-icd-libopencl1 pocl-opencl-icd \
      curl \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --create-home --home-dir /home/kiln kiln \
 && mkdir -p /models

COPY --from=build /build/bin/kiln-serve /build/bin/kilnc /usr/local/bin/

# For the NVIDIA container toolkit: which driver parts to mount when the container gets a GPU
# (compute: libcuda; utility: nvidia-smi). Without a GPU these variables do nothing.
ENV NVIDIA_DRIVER_CAPABILITIES=compute,utility
# The compile cache of an in-container kilnc, in the kiln user's home.
ENV KILN_CACHE_DIR=/home/kiln/.cache/kiln

USER kiln
WORKDIR /home/kiln
VOLUME ["/models"]

# HTTP (KServe v2 REST), gRPC, Prometheus metrics: kiln-serve's default ports.
EXPOSE 8000 8001 8002

# Ready means every model asked for is loaded; the start period covers loading large artifacts.
# It asks the default HTTP port: a container started with another --http-port needs its own
# health check (Kubernetes probes replace this one in any case).
HEALTHCHECK --interval=10s --timeout=3s --start-period=60s --retries=3 \
  CMD curl -fsS -o /dev/null http://127.0.0.1:8000/v2/health/ready || exit 1

# kiln-serve handles SIGTERM itself (readiness false, queued requests finish, exit 0), so it runs
# as PID 1 without a wrapper. Further flags go after the image name:
#   docker run ... kiln-serve --model-control-mode=explicit --load-model=resnet
ENTRYPOINT ["kiln-serve", "--model-repository=/models"]
CMD []
