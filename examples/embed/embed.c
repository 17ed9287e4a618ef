/* kiln-embed: embeds a compiled Kiln artifact through the C API only (kiln/runtime.h), linking
 * nothing but the kiln_runtime library.
 *
 *   kiln-embed ARTIFACT.kiln [--device=ID | --all-devices] [--threads=T] [--runs=M] [--dim=N]
 *
 * For each chosen device (the default device, one given id, or every listed device): it runs the
 * artifact once on one thread with deterministic inputs (symbolic dimensions set to N, default 3),
 * then starts T threads (default 4), each with its own session on the same shared artifact, each
 * running M times (default 5), and checks that every run of every thread produced outputs
 * byte-identical to the single-threaded run. It prints each output's shape and first values.
 * With --all-devices, devices whose driver the artifact has no kernels for are skipped with the
 * reason printed. Exit status: 0 all identical, 1 a mismatch or an error.
 *
 * Plain C11 (threads.h); compiled as C to prove the header is C.
 */
#include <kiln/runtime.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <threads.h>

#define MAX_TENSORS 32
#define MAX_RANK 16
#define MAX_THREADS 64

typedef struct {
  void* data;
  size_t bytes;
  kiln_dtype dtype;
  int64_t dims[MAX_RANK];
  size_t rank;
} host_tensor;

typedef struct {
  size_t count;
  char names[MAX_TENSORS][128];
  host_tensor tensors[MAX_TENSORS];
} tensor_set;

static int fail_status(const char* what, kiln_status status) {
  fprintf(stderr, "kiln-embed: error: %s: %s: %s\n", what, kiln_status_name(status),
          kiln_last_error_message());
  return 1;
}

static void free_set(tensor_set* set) {
  for (size_t i = 0; i < set->count; ++i) free(set->tensors[i].data);
  set->count = 0;
}

/* The bits of a float in a smaller float type (`width` bits: a sign, then the exponent with
 * `bias`, then `mantissa` bits) that holds it exactly as +0 or a normal number: the small values
 * used below, in f16 (16, 10, 15) and the 8-bit floats. */
static uint32_t small_float_bits(float value, int width, int mantissa, int bias) {
  uint32_t bits;
  memcpy(&bits, &value, sizeof bits);
  uint32_t sign = (bits >> 31) << (width - 1);
  if ((bits & 0x7fffffffu) == 0) return sign;
  uint32_t exponent = ((bits >> 23) & 0xffu) - 127u + (uint32_t)bias;
  return sign | (exponent << mantissa) | ((bits & 0x7fffffu) >> (23 - mantissa));
}

/* Deterministic element `i` of input `k`: values exact in every float type, small non-negative
 * integers (valid as gather indices for any axis of size >= 2), alternating booleans. */
static void fill_element(kiln_dtype dtype, unsigned char* p, size_t i, size_t k) {
  float f = (float)((int)((i * 7 + k * 3) % 9) - 4) * 0.25f;
  int64_t n = (int64_t)((i + k) % 2);
  switch (dtype) {
    case KILN_DTYPE_F32: memcpy(p, &f, 4); break;
    case KILN_DTYPE_F16: { uint16_t h = (uint16_t)small_float_bits(f, 16, 10, 15); memcpy(p, &h, 2); break; }
    case KILN_DTYPE_BF16: { uint32_t b; memcpy(&b, &f, 4); uint16_t h = (uint16_t)(b >> 16); memcpy(p, &h, 2); break; }
    case KILN_DTYPE_I64: memcpy(p, &n, 8); break;
    case KILN_DTYPE_I32: { int32_t v = (int32_t)n; memcpy(p, &v, 4); break; }
    case KILN_DTYPE_I8: case KILN_DTYPE_U8: case KILN_DTYPE_BOOL: *p = (unsigned char)n; break;
    case KILN_DTYPE_F8E4M3FN: *p = (unsigned char)small_float_bits(f, 8, 3, 7); break;
    case KILN_DTYPE_F8E4M3FNUZ: *p = (unsigned char)small_float_bits(f, 8, 3, 8); break;
    case KILN_DTYPE_F8E5M2: *p = (unsigned char)small_float_bits(f, 8, 2, 15); break;
    case KILN_DTYPE_F8E5M2FNUZ: *p = (unsigned char)small_float_bits(f, 8, 2, 16); break;
  }
}

static int make_inputs(const kiln_artifact* artifact, int64_t symbol_size, tensor_set* inputs) {
  size_t count = 0;
  kiln_status st = kiln_artifact_input_count(artifact, &count);
  if (st != KILN_OK) return fail_status("input count", st);
  if (count > MAX_TENSORS) { fprintf(stderr, "kiln-embed: error: too many inputs\n"); return 1; }
  inputs->count = 0;
  for (size_t k = 0; k < count; ++k) {
    kiln_tensor_info info;
    if ((st = kiln_artifact_input_info(artifact, k, &info)) != KILN_OK) return fail_status("input info", st);
    if (info.rank > MAX_RANK) { fprintf(stderr, "kiln-embed: error: rank too large\n"); return 1; }
    host_tensor* t = &inputs->tensors[k];
    snprintf(inputs->names[k], sizeof inputs->names[k], "%s", info.name);
    t->dtype = info.dtype;
    t->rank = info.rank;
    size_t elements = 1;
    for (size_t d = 0; d < info.rank; ++d) {
      t->dims[d] = info.dims[d] < 0 ? symbol_size : info.dims[d];
      elements *= (size_t)t->dims[d];
    }
    size_t element_size = kiln_dtype_size(info.dtype);
    t->bytes = elements * element_size;
    t->data = malloc(t->bytes ? t->bytes : 1);
    if (!t->data) { fprintf(stderr, "kiln-embed: error: out of memory\n"); return 1; }
    inputs->count = k + 1;
    for (size_t i = 0; i < elements; ++i)
      fill_element(info.dtype, (unsigned char*)t->data + i * element_size, i, k);
  }
  return 0;
}

/* Binds `inputs`, runs, and copies every output into `outputs` (allocated here). */
static kiln_status run_once(kiln_session* session, const kiln_artifact* artifact,
                            const tensor_set* inputs, tensor_set* outputs) {
  kiln_status st;
  for (size_t k = 0; k < inputs->count; ++k) {
    const host_tensor* t = &inputs->tensors[k];
    st = kiln_session_set_input(session, inputs->names[k], t->dtype, t->dims, t->rank, t->data, t->bytes);
    if (st != KILN_OK) return st;
  }
  if ((st = kiln_session_run(session)) != KILN_OK) return st;
  size_t count = 0;
  if ((st = kiln_artifact_output_count(artifact, &count)) != KILN_OK) return st;
  if (count > MAX_TENSORS) return KILN_UNSUPPORTED;
  outputs->count = 0;
  for (size_t k = 0; k < count; ++k) {
    kiln_tensor_info info;
    if ((st = kiln_artifact_output_info(artifact, k, &info)) != KILN_OK) return st;
    host_tensor* t = &outputs->tensors[k];
    snprintf(outputs->names[k], sizeof outputs->names[k], "%s", info.name);
    t->dtype = info.dtype;
    if ((st = kiln_session_output_shape(session, info.name, t->dims, MAX_RANK, &t->rank)) != KILN_OK) return st;
    const void* data = NULL;
    if ((st = kiln_session_get_output(session, info.name, &data, &t->bytes)) != KILN_OK) return st;
    t->data = malloc(t->bytes ? t->bytes : 1);
    if (!t->data) return KILN_OUT_OF_MEMORY;
    outputs->count = k + 1;
    if (t->bytes) memcpy(t->data, data, t->bytes);
  }
  return KILN_OK;
}

static int same_outputs(const tensor_set* a, const tensor_set* b) {
  if (a->count != b->count) return 0;
  for (size_t k = 0; k < a->count; ++k) {
    const host_tensor* x = &a->tensors[k];
    const host_tensor* y = &b->tensors[k];
    if (x->bytes != y->bytes || x->rank != y->rank) return 0;
    if (memcmp(x->dims, y->dims, x->rank * sizeof x->dims[0]) != 0) return 0;
    if (x->bytes && memcmp(x->data, y->data, x->bytes) != 0) return 0;
  }
  return 1;
}

typedef struct {
  kiln_artifact* artifact;
  const char* device_id;
  const tensor_set* inputs;
  const tensor_set* expected;
  int runs;
  int identical_runs;  /* out */
  kiln_status status;  /* out */
  char error[512];     /* out */
} worker;

static int worker_main(void* arg) {
  worker* w = (worker*)arg;
  kiln_session* session = NULL;
  w->status = kiln_session_create(w->artifact, w->device_id, &session);
  if (w->status != KILN_OK) {
    snprintf(w->error, sizeof w->error, "%s", kiln_last_error_message());
    return 0;
  }
  for (int r = 0; r < w->runs; ++r) {
    tensor_set got;
    got.count = 0;
    w->status = run_once(session, w->artifact, w->inputs, &got);
    if (w->status != KILN_OK) {
      snprintf(w->error, sizeof w->error, "%s", kiln_last_error_message());
      free_set(&got);
      break;
    }
    w->identical_runs += same_outputs(&got, w->expected);
    free_set(&got);
  }
  kiln_session_destroy(session);
  return 0;
}

static double element_value(const host_tensor* t, size_t i) {
  const unsigned char* p = (const unsigned char*)t->data;
  switch (t->dtype) {
    case KILN_DTYPE_F32: { float f; memcpy(&f, p + 4 * i, 4); return f; }
    case KILN_DTYPE_BF16: { uint16_t h; memcpy(&h, p + 2 * i, 2); uint32_t b = (uint32_t)h << 16; float f; memcpy(&f, &b, 4); return f; }
    case KILN_DTYPE_I64: { int64_t v; memcpy(&v, p + 8 * i, 8); return (double)v; }
    case KILN_DTYPE_I32: { int32_t v; memcpy(&v, p + 4 * i, 4); return v; }
    case KILN_DTYPE_I8: return (signed char)p[i];
    case KILN_DTYPE_U8: case KILN_DTYPE_BOOL: return p[i];
    case KILN_DTYPE_F16: { uint16_t h; memcpy(&h, p + 2 * i, 2); return (double)h; }  /* raw bits */
    case KILN_DTYPE_F8E4M3FN: case KILN_DTYPE_F8E4M3FNUZ: case KILN_DTYPE_F8E5M2: case KILN_DTYPE_F8E5M2FNUZ:
      return p[i]; /* raw bits */
  }
  return 0;
}

static void print_outputs(const tensor_set* outputs) {
  for (size_t k = 0; k < outputs->count; ++k) {
    const host_tensor* t = &outputs->tensors[k];
    printf("  output %s: %s[", outputs->names[k], kiln_dtype_name(t->dtype));
    for (size_t d = 0; d < t->rank; ++d) printf("%s%lld", d ? ", " : "", (long long)t->dims[d]);
    const int float8 = t->dtype == KILN_DTYPE_F8E4M3FN || t->dtype == KILN_DTYPE_F8E4M3FNUZ ||
                       t->dtype == KILN_DTYPE_F8E5M2 || t->dtype == KILN_DTYPE_F8E5M2FNUZ;
    printf("]%s", t->dtype == KILN_DTYPE_F16 ? " (f16 bits)" : float8 ? " (bits)" : "");
    size_t n = t->bytes / kiln_dtype_size(t->dtype);
    for (size_t i = 0; i < n && i < 6; ++i) printf(" %.6g", element_value(t, i));
    printf("%s\n", n > 6 ? " ..." : "");
  }
}

/* Runs the whole check on one device; returns 0 (pass or skipped), 1 (failure). */
static int check_device(kiln_artifact* artifact, const char* device_id, const tensor_set* inputs,
                        int threads, int runs, int skip_unsupported) {
  int can_run = 0;
  kiln_status st = kiln_artifact_supports_device(artifact, device_id, &can_run);
  if (st != KILN_OK) return fail_status("device", st);
  if (!can_run) {
    printf("device %s: skipped: %s\n", device_id, kiln_last_error_message());
    return skip_unsupported ? 0 : 1;
  }
  kiln_session* session = NULL;
  st = kiln_session_create(artifact, device_id, &session);
  if (st == KILN_UNSUPPORTED && skip_unsupported) {
    printf("device %s: skipped: %s\n", device_id, kiln_last_error_message());
    return 0;
  }
  if (st != KILN_OK) return fail_status("creating a session", st);
  const char* used = NULL;
  kiln_session_device_id(session, &used);
  char used_id[128];
  snprintf(used_id, sizeof used_id, "%s", used);

  tensor_set expected;
  expected.count = 0;
  st = run_once(session, artifact, inputs, &expected);
  kiln_session_destroy(session);
  if (st != KILN_OK) {
    free_set(&expected);
    return fail_status("single-threaded run", st);
  }
  printf("device %s: single-threaded run\n", used_id);
  print_outputs(&expected);

  worker workers[MAX_THREADS];
  thrd_t ids[MAX_THREADS];
  int started = 0;
  for (int t = 0; t < threads; ++t) {
    worker* w = &workers[t];
    memset(w, 0, sizeof *w);
    w->artifact = artifact;
    w->device_id = used_id;
    w->inputs = inputs;
    w->expected = &expected;
    w->runs = runs;
    if (thrd_create(&ids[t], worker_main, w) != thrd_success) {
      fprintf(stderr, "kiln-embed: error: cannot start thread %d\n", t);
      break;
    }
    ++started;
  }
  int failures = started == threads ? 0 : 1;
  for (int t = 0; t < started; ++t) {
    thrd_join(ids[t], NULL);
    const worker* w = &workers[t];
    if (w->status != KILN_OK) {
      fprintf(stderr, "kiln-embed: error: thread %d on %s: %s: %s\n", t, used_id,
              kiln_status_name(w->status), w->error);
      ++failures;
    } else if (w->identical_runs != runs) {
      fprintf(stderr, "kiln-embed: error: thread %d on %s: %d of %d runs differ from the "
              "single-threaded run\n", t, used_id, runs - w->identical_runs, runs);
      ++failures;
    }
  }
  printf("device %s: %d threads x %d runs: %s\n", used_id, threads, runs,
         failures ? "MISMATCH" : "all identical to the single-threaded run");
  free_set(&expected);
  return failures ? 1 : 0;
}

int main(int argc, char** argv) {
  const char* path = NULL;
  const char* device = "";
  int all_devices = 0, threads = 4, runs = 5;
  long long dim = 3;
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    if (strncmp(a, "--device=", 9) == 0) device = a + 9;
    else if (strcmp(a, "--all-devices") == 0) all_devices = 1;
    else if (strncmp(a, "--threads=", 10) == 0) threads = atoi(a + 10);
    else if (strncmp(a, "--runs=", 7) == 0) runs = atoi(a + 7);
    else if (strncmp(a, "--dim=", 6) == 0) dim = atoll(a + 6);
    else if (a[0] == '-') { fprintf(stderr, "kiln-embed: error: unknown option '%s'\n", a); return 1; }
    else path = a;
  }
  if (!path || threads < 1 || threads > MAX_THREADS || runs < 1 || dim < 0) {
    fprintf(stderr, "usage: kiln-embed ARTIFACT.kiln [--device=ID | --all-devices] [--threads=1..%d] "
            "[--runs=M] [--dim=N]\n", MAX_THREADS);
    return 1;
  }
  printf("kiln runtime %s\n", kiln_runtime_version());

  kiln_artifact* artifact = NULL;
  kiln_status st = kiln_artifact_load_file(path, &artifact);
  if (st != KILN_OK) return fail_status("loading the artifact", st);
  tensor_set inputs;
  inputs.count = 0;
  if (make_inputs(artifact, (int64_t)dim, &inputs) != 0) {
    free_set(&inputs);
    kiln_artifact_destroy(artifact);
    return 1;
  }

  int failures = 0;
  if (all_devices) {
    size_t count = 0;
    st = kiln_device_count(&count);
    if (st != KILN_OK) {
      failures = fail_status("listing devices", st);
    } else {
      for (size_t i = 0; i < count; ++i) {
        kiln_device_info info;
        if ((st = kiln_device_get_info(i, &info)) != KILN_OK) { failures += fail_status("device info", st); continue; }
        failures += check_device(artifact, info.id, &inputs, threads, runs, 1);
      }
    }
  } else {
    failures = check_device(artifact, device, &inputs, threads, runs, 0);
  }
  free_set(&inputs);
  kiln_artifact_destroy(artifact);
  return failures ? 1 : 0;
}
