/* A C application of the installed Kiln runtime: loads an artifact, binds every input to a
 * deterministic pattern (symbolic dims = 3), runs it on the given device and on the reference
 * interpreter, and prints each f32 output's checksum and the largest difference between the two
 * devices. Exit status 0 only when every call succeeded and the devices agree. */
#include <kiln/runtime.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(call)                                                                        \
  do {                                                                                     \
    kiln_status s_ = (call);                                                               \
    if (s_ != KILN_OK) {                                                                   \
      fprintf(stderr, "consumer: %s: %s: %s\n", #call, kiln_status_name(s_), kiln_last_error_message()); \
      exit(1);                                                                             \
    }                                                                                      \
  } while (0)

/* Runs `artifact` on `device`; returns the f32 outputs concatenated (malloc'ed), their count in *n. */
static float* run_on(kiln_artifact* artifact, const char* device, size_t* n) {
  kiln_session* session = NULL;
  CHECK(kiln_session_create(artifact, device, &session));
  size_t inputs = 0;
  CHECK(kiln_artifact_input_count(artifact, &inputs));
  for (size_t i = 0; i < inputs; ++i) {
    kiln_tensor_info info;
    CHECK(kiln_artifact_input_info(artifact, i, &info));
    int64_t dims[16];
    size_t count = 1;
    for (size_t d = 0; d < info.rank && d < 16; ++d) {
      dims[d] = info.dims[d] < 0 ? 3 : info.dims[d];
      count *= (size_t)dims[d];
    }
    if (info.dtype != KILN_DTYPE_F32) {
      fprintf(stderr, "consumer: input '%s' is not f32\n", info.name);
      exit(1);
    }
    float* data = malloc(count * sizeof(float) + 1);
    for (size_t k = 0; k < count; ++k) data[k] = (float)((int)(k * 7 % 13) - 6) / 8.0f;
    CHECK(kiln_session_set_input(session, info.name, info.dtype, dims, info.rank, data, count * sizeof(float)));
    free(data);
  }
  CHECK(kiln_session_run(session));
  size_t outputs = 0;
  CHECK(kiln_artifact_output_count(artifact, &outputs));
  float* all = NULL;
  *n = 0;
  for (size_t o = 0; o < outputs; ++o) {
    kiln_tensor_info info;
    CHECK(kiln_artifact_output_info(artifact, o, &info));
    const void* data = NULL;
    size_t bytes = 0;
    CHECK(kiln_session_get_output(session, info.name, &data, &bytes));
    all = realloc(all, (*n) * sizeof(float) + bytes + 1);
    memcpy(all + *n, data, bytes);
    *n += bytes / sizeof(float);
  }
  kiln_session_destroy(session);
  return all;
}

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: consumer ARTIFACT.kiln DEVICE\n");
    return 2;
  }
  printf("kiln runtime %s (API %d, ABI %d)\n", kiln_runtime_version(), KILN_RUNTIME_API_VERSION,
         KILN_RUNTIME_ABI_VERSION);
  kiln_artifact* artifact = NULL;
  CHECK(kiln_artifact_load_file(argv[1], &artifact));
  size_t n = 0, n_ref = 0;
  float* out = run_on(artifact, argv[2], &n);
  float* ref = run_on(artifact, "reference", &n_ref);
  if (n != n_ref || n == 0) {
    fprintf(stderr, "consumer: %zu output values on %s, %zu on the reference\n", n, argv[2], n_ref);
    return 1;
  }
  double checksum = 0, max_diff = 0;
  for (size_t k = 0; k < n; ++k) {
    checksum += ref[k] * (double)((k % 17) + 1);
    double diff = fabs((double)out[k] - ref[k]) / (1.0 + fabs(ref[k]));
    if (!(diff <= max_diff)) max_diff = diff; /* NaN counts as a difference */
  }
  printf("outputs: %zu values, checksum %.6e, max difference from the reference %.2e\n", n, checksum, max_diff);
  kiln_artifact_destroy(artifact);
  free(out);
  free(ref);
  return max_diff < 1e-3 ? 0 : 1;
}
