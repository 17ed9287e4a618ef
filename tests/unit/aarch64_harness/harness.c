/* A harness for the cpu target's AArch64 cross-compilation (test_cpu_aarch64.cpp): built for
 * AArch64 Linux and run under qemu-aarch64, it loads a kernel module the cpu target built with
 * --cpu=aarch64, calls one entry point over work units [0, UNITS) with the cpu driver's ABI
 * (runtime/drivers/cpu/cpu_driver.h) on one thread, and writes every buffer back.
 *
 *   harness MODULE.so ENTRY UNITS NSYMBOLS SYMBOL... FILE...
 *
 * Each FILE holds one buffer (in the kernel's buffer order), read whole before the call and
 * written whole after it. Exit status 0 on success, 1 with a message on stderr otherwise. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

typedef void (*kernel_entry)(void* const* buffers, const long long* symbols, long long begin, long long end);

static void* read_whole(const char* path, long* size) {
  FILE* f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  *size = ftell(f);
  fseek(f, 0, SEEK_SET);
  void* data = malloc(*size > 0 ? (size_t)*size : 1);
  if (data && *size > 0 && fread(data, 1, (size_t)*size, f) != (size_t)*size) {
    free(data);
    data = NULL;
  }
  fclose(f);
  return data;
}

int main(int argc, char** argv) {
  if (argc < 5) {
    fprintf(stderr, "usage: %s MODULE.so ENTRY UNITS NSYMBOLS SYMBOL... FILE...\n", argv[0]);
    return 1;
  }
  void* module = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!module) {
    fprintf(stderr, "dlopen %s: %s\n", argv[1], dlerror());
    return 1;
  }
  kernel_entry entry = (kernel_entry)dlsym(module, argv[2]);
  if (!entry) {
    fprintf(stderr, "no function %s in %s\n", argv[2], argv[1]);
    return 1;
  }
  const long long units = atoll(argv[3]);
  const int nsymbols = atoi(argv[4]);
  if (nsymbols < 0 || 5 + nsymbols > argc) {
    fprintf(stderr, "bad symbol count %d\n", nsymbols);
    return 1;
  }
  long long* symbols = calloc((size_t)nsymbols + 1, sizeof(long long));
  for (int i = 0; i < nsymbols; ++i) symbols[i] = atoll(argv[5 + i]);
  const int first_file = 5 + nsymbols, nbuffers = argc - first_file;
  void** buffers = calloc((size_t)nbuffers + 1, sizeof(void*));
  long* sizes = calloc((size_t)nbuffers + 1, sizeof(long));
  for (int i = 0; i < nbuffers; ++i) {
    buffers[i] = read_whole(argv[first_file + i], &sizes[i]);
    if (!buffers[i]) {
      fprintf(stderr, "cannot read %s\n", argv[first_file + i]);
      return 1;
    }
  }
  entry(buffers, symbols, 0, units);
  for (int i = 0; i < nbuffers; ++i) {
    FILE* f = fopen(argv[first_file + i], "wb");
    if (!f || fwrite(buffers[i], 1, (size_t)sizes[i], f) != (size_t)sizes[i] || fclose(f) != 0) {
      fprintf(stderr, "cannot write %s\n", argv[first_file + i]);
      return 1;
    }
  }
  return 0;
}
