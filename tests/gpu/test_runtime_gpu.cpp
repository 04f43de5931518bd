// runtime on a GPU: loading per context, no private contexts, graph-capture rules, thread
// safety, driver errors that name the call, and one launch through launch().
#include <catch2/catch.hpp>
#include <cstdint>
#include <cstring>
#include <latch>
#include <thread>
#include <vector>

#include "fkv/driver.hpp"
#include "fkv/runtime.hpp"

using Catch::Matchers::Contains;

namespace {

// GPU tests run only where a GPU is expected (CI runs `ctest -LE gpu`), so a driver that does
// not load is a failure with its message, not a silent skip.
bool have_gpu() {
  try {
    fkv::Driver::get();
    return true;
  } catch (const fkv::CudaError& e) {
    FAIL("GPU test without a usable CUDA driver: " << e.what());
  }
  return false;
}

fkv::KernelSpec simple_spec(int rotary_dim = 128) {
  fkv::KernelSpec s;  // neox, bf16 in and out, fp32 cos/sin, int64 indices, stacked
  s.num_kv_heads = 8;
  s.head_dim = 128;
  s.rotary_dim = rotary_dim;
  return s;
}

CUcontext current_context() {
  CUcontext ctx = nullptr;
  FKV_CU(cuCtxGetCurrent, &ctx);
  return ctx;
}

// A fresh Runtime over a memory-only cache: each test compiles and loads for itself.
struct Fixture {
  fkv::KernelCache cache{fkv::CacheOptions{}};
  fkv::Runtime runtime{cache};
};

std::uint16_t bf16_of(float f) {  // exact for the small values used here
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return static_cast<std::uint16_t>(u >> 16);
}

}  // namespace

TEST_CASE("prepare loads into the primary context, once per context, creating none",
          "[runtime][gpu]") {
  if (!have_gpu()) return;
  Fixture f;
  fkv::PrimaryContext primary(0);

  // No current context: prepare makes device 0's primary context current.
  FKV_CU(cuCtxSetCurrent, nullptr);
  const fkv::LoadedKernel& k = f.runtime.prepare(simple_spec(), 0);
  CHECK(current_context() == primary.get());
  CHECK(k.context == primary.get());
  CHECK(k.function != nullptr);
  CHECK(k.device == 0);
  CHECK(k.sm_count > 0);
  // The driver's occupancy: at least one block per SM, at most what 2048 threads allow.
  CHECK(k.resident_blocks >= k.sm_count);
  CHECK(k.resident_blocks <= std::int64_t{k.sm_count} * (2048 / k.tiling.block_threads));
  CHECK(k.arch.major >= 8);
  CHECK(k.tiling.block_threads > 0);
  CHECK(k.load_seconds > 0);
  CHECK(k.spec == simple_spec());

  // Loaded once: the same object, not a second load.
  const fkv::LoadedKernel& again = f.runtime.prepare(simple_spec(), 0);
  CHECK(&again == &k);
  CHECK(again.function == k.function);
  CHECK(current_context() == primary.get());

  // A current context is kept as it is: prepare does not switch to (or create) another.
  FKV_CU(cuCtxPushCurrent, primary.get());
  const fkv::LoadedKernel& pushed = f.runtime.prepare(simple_spec(), 0);
  CHECK(&pushed == &k);
  CHECK(current_context() == primary.get());
  CUcontext popped = nullptr;
  FKV_CU(cuCtxPopCurrent, &popped);
  CHECK(popped == primary.get());

  // get() on a stream of this context finds the same kernel without loading.
  fkv::Stream stream;
  CHECK(&f.runtime.get(simple_spec(), stream.get()) == &k);
  CHECK(&f.runtime.get(simple_spec(), nullptr) == &k);
}

TEST_CASE("device_arch is the device's compute capability", "[runtime][gpu]") {
  if (!have_gpu()) return;
  fkv::Driver& d = fkv::Driver::get();
  CUdevice dev = fkv::device_handle(0);
  int major = 0, minor = 0;
  FKV_CU(cuDeviceGetAttribute, &major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
  FKV_CU(cuDeviceGetAttribute, &minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
  fkv::Arch arch = fkv::Runtime::device_arch(0);
  CHECK_FALSE(arch.arch_specific);
  CHECK(arch.number() <= major * 10 + minor);
  bool supported = false;
  for (const fkv::Arch& a : fkv::supported_archs()) supported |= a.number() == major * 10 + minor;
  if (supported) CHECK(arch.number() == major * 10 + minor);

  CHECK_THROWS_WITH(fkv::Runtime::device_arch(d.device_count), Contains("does not exist"));
}

TEST_CASE("loading during stream capture is a clear error and leaves the capture usable",
          "[runtime][gpu]") {
  if (!have_gpu()) return;
  Fixture f;
  fkv::ensure_context(0);
  fkv::Stream stream;
  const fkv::KernelSpec prepared = simple_spec(128);
  const fkv::KernelSpec unprepared = simple_spec(64);
  const fkv::LoadedKernel& k = f.runtime.prepare(prepared, 0);

  FKV_CU(cuStreamBeginCapture, stream.get(), CU_STREAM_CAPTURE_MODE_GLOBAL);
  CHECK_THROWS_WITH(f.runtime.get(unprepared, stream.get()),
                    Contains("cannot load kernel " + unprepared.short_name() +
                             " while stream is capturing a CUDA graph") &&
                        Contains("before capture"));
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  FKV_CU(cuStreamIsCapturing, stream.get(), &status);
  CHECK(status == CU_STREAM_CAPTURE_STATUS_ACTIVE);  // not invalidated

  // A prepared kernel is found during capture and its launch is captured (never run here).
  const fkv::LoadedKernel& during = f.runtime.get(prepared, stream.get());
  CHECK(&during == &k);
  FkvKernelParams params{};
  params.num_layers = 1;
  params.layers_per_block = 1;
  fkv::launch(k, params, 1, 1, 1, stream.get());

  CUgraph graph = nullptr;
  FKV_CU(cuStreamEndCapture, stream.get(), &graph);
  REQUIRE(graph != nullptr);
  CUgraphExec exec = nullptr;
  FKV_CU(cuGraphInstantiate, &exec, graph, 0);
  CHECK(exec != nullptr);
  FKV_CU(cuGraphExecDestroy, exec);
  FKV_CU(cuGraphDestroy, graph);

  // After capture the same spec loads normally.
  CHECK(f.runtime.get(unprepared, stream.get()).function != nullptr);
}

TEST_CASE("prepare from 8 threads at once loads one kernel", "[runtime][gpu]") {
  if (!have_gpu()) return;
  Fixture f;
  const fkv::KernelSpec spec = simple_spec(32);
  constexpr int kThreads = 8;
  std::vector<const fkv::LoadedKernel*> seen(kThreads, nullptr);
  std::vector<CUcontext> contexts(kThreads, nullptr);
  std::vector<std::string> errors(kThreads);
  std::latch start(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      start.arrive_and_wait();
      try {
        seen[i] = &f.runtime.prepare(spec, 0);  // a new thread has no current context
        contexts[i] = current_context();
      } catch (const std::exception& e) {
        errors[i] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  fkv::PrimaryContext primary(0);
  for (int i = 0; i < kThreads; ++i) {
    INFO("thread " << i << ": " << errors[i]);
    CHECK(errors[i].empty());
    CHECK(seen[i] == seen[0]);
    CHECK(contexts[i] == primary.get());
  }
  REQUIRE(seen[0] != nullptr);
  CHECK(seen[0]->function != nullptr);
}

TEST_CASE("a failing driver call names the call and the error", "[driver][gpu]") {
  if (!have_gpu()) return;
  fkv::ensure_context(0);
  try {
    fkv::DeviceBuffer huge(std::size_t{1} << 60);  // 1 EiB
    FAIL("cuMemAlloc of 1 EiB succeeded");
  } catch (const fkv::CudaError& e) {
    CHECK_THAT(e.what(), Contains("cuMemAlloc") && Contains("CUDA_ERROR_OUT_OF_MEMORY"));
    CHECK(e.call == "cuMemAlloc");
    CHECK(e.code == CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(e.code_name == "CUDA_ERROR_OUT_OF_MEMORY");
  }
  // The context survives the error: a small allocation works.
  fkv::DeviceBuffer small(1024);
  CHECK(small.get() != 0);
}

TEST_CASE("launch runs the loaded kernel (identity RoPE copies K and V)", "[runtime][gpu]") {
  if (!have_gpu()) return;
  Fixture f;
  fkv::ensure_context(0);
  const fkv::KernelSpec spec = simple_spec();
  const fkv::LoadedKernel& k = f.runtime.prepare(spec, 0);
  const int H = spec.num_kv_heads, D = spec.head_dim, R = spec.rotary_dim, KV = H * D;
  const int T = 37, L = 2;  // T*H not a multiple of heads_per_block: the tail block runs too

  std::vector<std::uint16_t> proj(static_cast<std::size_t>(T) * L * 2 * KV);
  for (std::size_t i = 0; i < proj.size(); ++i)
    proj[i] = bf16_of(static_cast<float>(static_cast<int>(i % 251) - 125) * 0.5f);
  std::vector<std::int64_t> positions(T, 0);
  std::vector<float> cos_sin(R);
  for (int i = 0; i < R; ++i) cos_sin[i] = i < R / 2 ? 1.f : 0.f;  // cos 1, sin 0: identity

  fkv::DeviceBuffer d_proj(proj.size() * 2), d_pos(T * 8), d_cs(R * 4);
  const std::size_t out_elems = static_cast<std::size_t>(L) * T * KV;
  fkv::DeviceBuffer d_k(out_elems * 2), d_v(out_elems * 2);
  // Uploads and poison in the launch stream's order (the legacy-stream forms may still be
  // running on return, and the non-blocking stream would not wait for them).
  fkv::Stream stream;
  FKV_CU(cuMemcpyHtoDAsync, d_proj.get(), proj.data(), proj.size() * 2, stream.get());
  FKV_CU(cuMemcpyHtoDAsync, d_pos.get(), positions.data(), T * 8, stream.get());
  FKV_CU(cuMemcpyHtoDAsync, d_cs.get(), cos_sin.data(), R * 4, stream.get());
  FKV_CU(cuMemsetD8Async, d_k.get(), 0xFF, out_elems * 2, stream.get());
  FKV_CU(cuMemsetD8Async, d_v.get(), 0xFF, out_elems * 2, stream.get());

  FkvKernelParams p{};
  p.proj = d_proj.ptr();
  p.proj_stride_token = static_cast<long long>(L) * 2 * KV;
  p.proj_stride_layer = 2 * KV;
  p.num_tokens = T;
  p.positions = d_pos.ptr();
  p.cos_sin = d_cs.ptr();
  p.cos_sin_stride = R;
  p.max_position = 1;
  p.num_layers = L;
  p.layers_per_block = 1;
  p.k_out = d_k.ptr();
  p.v_out = d_v.ptr();
  for (int l = 0; l < FKV_MAX_LAYERS; ++l) {
    p.eps[l] = 1e-6f;
    p.k_scale[l] = 1.f;
    p.v_scale[l] = 1.f;
  }

  const unsigned grid_x =
      static_cast<unsigned>((T * H + k.tiling.heads_per_block - 1) / k.tiling.heads_per_block);
  fkv::launch(k, p, grid_x, L, 1, stream.get());
  stream.synchronize();

  std::vector<std::uint16_t> k_out(out_elems), v_out(out_elems);
  FKV_CU(cuMemcpyDtoH, k_out.data(), d_k.get(), out_elems * 2);
  FKV_CU(cuMemcpyDtoH, v_out.data(), d_v.get(), out_elems * 2);
  int k_bad = 0, v_bad = 0;
  for (int l = 0; l < L; ++l)
    for (int t = 0; t < T; ++t)
      for (int e = 0; e < KV; ++e) {
        const std::size_t out = (static_cast<std::size_t>(l) * T + t) * KV + e;
        const std::size_t in = (static_cast<std::size_t>(t) * L + l) * 2 * KV + e;
        k_bad += k_out[out] != proj[in];
        v_bad += v_out[out] != proj[in + KV];
      }
  CHECK(k_bad == 0);
  CHECK(v_bad == 0);
}

TEST_CASE("each device gets its own load", "[runtime][gpu]") {
  if (!have_gpu()) return;
  if (fkv::Driver::get().device_count < 2) {
    WARN("one device: multi-device check skipped");
    return;
  }
  Fixture f;
  const fkv::LoadedKernel* k0 = nullptr;
  const fkv::LoadedKernel* k1 = nullptr;
  std::string error;
  // Fresh threads have no current context, so `device` picks the primary context.
  auto prepare_on = [&](int device, const fkv::LoadedKernel*& out) {
    std::thread([&] {
      try {
        out = &f.runtime.prepare(simple_spec(), device);
      } catch (const std::exception& e) {
        error += e.what();
      }
    }).join();
  };
  prepare_on(0, k0);
  prepare_on(1, k1);
  INFO(error);
  REQUIRE(k0 != nullptr);
  REQUIRE(k1 != nullptr);
  CHECK(k0 != k1);
  CHECK(k0->device == 0);
  CHECK(k1->device == 1);
  CHECK(k0->context != k1->context);
}
