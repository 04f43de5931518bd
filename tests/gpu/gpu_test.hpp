// What the Catch2 GPU test files share at the start of a test: the GPU check and the run's seed.
// (gpu_harness.hpp holds the helpers without Catch2, which worker threads use too.)
#pragma once

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdint>
#include <cstdio>

#include "fkv/driver.hpp"
#include "gpu/gpu_harness.hpp"

namespace fkv_test {

// Fails the test, saying what to run instead, where there is no CUDA driver or device; else
// makes device 0's primary context current.
inline void require_gpu() {
  if (!fkv::Driver::available())
    FAIL(
        "no CUDA driver or device: this test carries the `gpu` label; run `ctest -LE gpu` on "
        "machines without a GPU");
  fkv::ensure_context(0);
}

// The seed of this run: FKV_TEST_SEED, else taken from the clock. Printed once as
// "<test>: FKV_TEST_SEED=<n>", so that a failing run can be repeated with the same inputs.
inline std::uint64_t run_seed(const char* test) {
  static const std::uint64_t seed = [test] {
    const auto now =
        static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
    const auto s = static_cast<std::uint64_t>(
        env_int("FKV_TEST_SEED", static_cast<std::int64_t>(now % 1000000007)));
    std::printf("%s: FKV_TEST_SEED=%llu\n", test, static_cast<unsigned long long>(s));
    std::fflush(stdout);
    return s;
  }();
  return seed;
}

}  // namespace fkv_test
