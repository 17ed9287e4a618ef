// A hand-written cpu kernel module for tests/unit/test_cpu_driver.cpp, so that the cpu driver is
// tested without the cpu code-generation target: y = relu(x + b) * KILN_TEST_SCALE over the
// elements of f32 tensors, with the cpu driver's ABI (runtime/drivers/cpu/cpu_driver.h).
// tests/CMakeLists.txt builds it twice, with scales 1 and 2 (two distinct modules).
#include <stdint.h>

__attribute__((visibility("default"))) void kiln_test_add_relu(void* const* buffers, const int64_t* symbols,
                                                               int64_t begin, int64_t end) {
  const float* x = (const float*)buffers[0];
  const float* b = (const float*)buffers[1];
  float* y = (float*)buffers[2];
  (void)symbols;
  for (int64_t i = begin; i < end; ++i) {
    const float sum = x[i] + b[i];
    y[i] = (sum > 0.0f ? sum : 0.0f) * (float)KILN_TEST_SCALE;
  }
}
