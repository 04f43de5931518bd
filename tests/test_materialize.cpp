// materialize without a GPU: the host-side argument checks (each names the argument and the fix)
// (the launch geometry is the spec module's: tests/test_spec.cpp). A call that passes every check
// reaches the launch, which needs a driver: here that is a CudaError, proving the checks let it
// through.
#include <catch2/catch.hpp>
#include <cstdint>
#include <vector>

#include "fkv/errors.hpp"
#include "fkv/materialize.hpp"

using namespace fkv;
using Catch::Contains;

namespace {

LoadedKernel fake_kernel(OutputMode mode, DType cache = DType::BF16) {
  LoadedKernel k;
  k.spec.num_kv_heads = 8;
  k.spec.head_dim = 128;
  k.spec.rotary_dim = 128;
  k.spec.k_norm = KNormKind::Rms;
  k.spec.mode = mode;
  k.spec.cache = cache;
  k.tiling = k.spec.tiling();
  k.sm_count = 132;
  k.resident_blocks = 132 * 16;
  return k;  // function stays null: nothing may launch it without a driver
}

// Fake, well-aligned device addresses: never dereferenced on the host.
void* addr(std::uintptr_t a) { return reinterpret_cast<void*>(a); }

struct Args {
  std::vector<float> eps = std::vector<float>(5, 1e-6f);
  FusedKVInputs in;
  Args() {
    in.proj = addr(0x10000000);
    in.num_tokens = 16;
    in.num_layers = 5;
    in.positions = addr(0x20000000);
    in.cos_sin = addr(0x30000000);
    in.max_position = 4096;
    in.k_norm_weight = static_cast<const float*>(addr(0x40000000));
    in.eps = eps;
  }
};

}  // namespace

TEST_CASE("stacked: each bad argument is named", "[materialize]") {
  const LoadedKernel k = fake_kernel(OutputMode::Stacked);
  const StackedOutput out{addr(0x50000000), addr(0x60000000)};
  Args a;
  auto expect = [&](const FusedKVInputs& in, const StackedOutput& o, const char* text) {
    CHECK_THROWS_AS(materialize_stacked(k, in, o, nullptr), ArgumentError);
    CHECK_THROWS_WITH(materialize_stacked(k, in, o, nullptr), Contains(text));
  };
  FusedKVInputs in = a.in;
  in.proj = addr(0x10000002);
  expect(in, out, "proj must be 16-byte aligned");
  in = a.in;
  in.proj = nullptr;
  expect(in, out, "proj is null");
  in = a.in;
  in.proj_stride_layer = 100;
  expect(in, out, "proj_stride_layer 100 is smaller than 2*H*D = 2048");
  in = a.in;
  in.proj_stride_layer = 2052;
  expect(in, out, "multiples of 8 elements");
  in = a.in;
  in.proj_stride_token = 2048;
  expect(in, out, "overlaps the layers");
  in = a.in;
  in.k_norm_weight = nullptr;
  expect(in, out, "k_norm_weight is null");
  in = a.in;
  in.max_position = 0;
  expect(in, out, "max_position");
  in = a.in;
  std::vector<float> three(3, 1e-6f);
  in.eps = three;
  expect(in, out, "eps has 3 values for 5 layers");
  in = a.in;
  in.num_layers = 0;
  expect(in, out, "num_layers must be >= 1");
  in = a.in;
  in.positions = addr(0x20000004);
  expect(in, out, "positions must be 8-byte aligned");
  expect(a.in, StackedOutput{addr(0x50000008), out.v_out}, "k_out must be 16-byte aligned");
  expect(a.in, StackedOutput{out.k_out, nullptr}, "v_out is null");
  const LoadedKernel pool = fake_kernel(OutputMode::Pool);
  CHECK_THROWS_WITH(materialize_stacked(pool, a.in, out, nullptr),
                    Contains("prepared for pool output"));
}

TEST_CASE("pool: buffers, slots and scales are checked", "[materialize]") {
  const LoadedKernel k = fake_kernel(OutputMode::Pool, DType::FP8_E4M3);
  Args a;
  std::vector<void*> kb(5, addr(0x70000000)), vb(5, addr(0x80000000));
  std::vector<float> scales(5, 0.5f);
  PoolOutput out;
  out.cache_loc = addr(0x90000000);
  out.k_buffers = kb;
  out.v_buffers = vb;
  out.num_slots = 1024;
  out.k_scales = scales;
  out.v_scales = scales;
  auto expect = [&](const PoolOutput& o, const char* text) {
    CHECK_THROWS_AS(materialize_pool(k, a.in, o, nullptr), ArgumentError);
    CHECK_THROWS_WITH(materialize_pool(k, a.in, o, nullptr), Contains(text));
  };
  PoolOutput o = out;
  std::vector<void*> four(4, addr(0x70000000));
  o.k_buffers = four;
  expect(o, "one K and one V buffer per layer");
  o = out;
  std::vector<void*> misaligned(5, addr(0x70000004));
  o.v_buffers = misaligned;
  expect(o, "v_buffers[l] must be 8-byte aligned");
  o = out;
  o.num_slots = 0;
  expect(o, "num_slots must be > 0");
  o = out;
  o.slot_stride = 1000;
  expect(o, "slot_stride 1000 must be >= H*D = 1024");
  o = out;
  std::vector<float> bad = {1, 1, 0, 1, 1};
  o.k_scales = bad;
  expect(o, "k_scales must be positive and finite");
  o = out;
  o.cache_loc = nullptr;
  expect(o, "cache_loc is null");
  // Scales on a non-fp8 cache are a mistake, not ignored.
  const LoadedKernel bf16 = fake_kernel(OutputMode::Pool);
  CHECK_THROWS_WITH(materialize_pool(bf16, a.in, out, nullptr), Contains("fp8 caches only"));
}

TEST_CASE("bias, error flag and device scales are checked", "[materialize]") {
  Args a;
  const StackedOutput out{addr(0x50000000), addr(0x60000000)};
  LoadedKernel k = fake_kernel(OutputMode::Stacked);
  auto expect = [&](const LoadedKernel& kk, const FusedKVInputs& in, const char* text) {
    CHECK_THROWS_AS(materialize_stacked(kk, in, out, nullptr), ArgumentError);
    CHECK_THROWS_WITH(materialize_stacked(kk, in, out, nullptr), Contains(text));
  };
  FusedKVInputs in = a.in;
  in.kv_bias = static_cast<const float*>(addr(0xa0000000));
  expect(k, in, "prepared without a bias; prepare a spec with kv_bias=true");
  in = a.in;
  in.error_flag = static_cast<unsigned int*>(addr(0xb0000002));
  expect(k, in, "error_flag must be 4-byte aligned");
  k.spec.debug_checks = true;
  expect(k, a.in, "error_flag (debug mode) is null");

  LoadedKernel kb = fake_kernel(OutputMode::Stacked);
  kb.spec.kv_bias = true;
  expect(kb, a.in, "kv_bias is null, but this kernel adds a K/V bias");
  in = a.in;
  in.kv_bias = static_cast<const float*>(addr(0xa0000008));
  expect(kb, in, "kv_bias must be 16-byte aligned");
  in.kv_bias = static_cast<const float*>(addr(0xa0000000));
  in.kv_bias_stride_layer = 2047;
  expect(kb, in, "kv_bias_stride_layer 2047 must be >= 2*H*D = 2048 and a multiple of 4");
  in.kv_bias_stride_layer = 2050;
  expect(kb, in, "kv_bias_stride_layer 2050");
  in.kv_bias_stride_layer =
      2052;  // padded rows are fine: past every check, the launch needs a driver
  CHECK_THROWS_AS(materialize_stacked(kb, in, out, nullptr), CudaError);

  // Device scales: fp8 only, not together with host scales, 4-byte aligned.
  const LoadedKernel fp8 = fake_kernel(OutputMode::Pool, DType::FP8_E4M3);
  std::vector<void*> kbuf(5, addr(0x70000000)), vbuf(5, addr(0x80000000));
  std::vector<float> scales(5, 0.5f);
  PoolOutput po;
  po.cache_loc = addr(0x90000000);
  po.k_buffers = kbuf;
  po.v_buffers = vbuf;
  po.num_slots = 64;
  po.k_scales_device = static_cast<const float*>(addr(0xc0000000));
  po.v_scales_device = static_cast<const float*>(addr(0xc0000100));
  CHECK_THROWS_AS(materialize_pool(fp8, a.in, po, nullptr), CudaError);  // valid
  PoolOutput o = po;
  o.k_scales = scales;
  CHECK_THROWS_WITH(materialize_pool(fp8, a.in, o, nullptr),
                    Contains("give k_scales as host values or as a device array, not both"));
  o = po;
  o.v_scales_device = static_cast<const float*>(addr(0xc0000102));
  CHECK_THROWS_WITH(materialize_pool(fp8, a.in, o, nullptr),
                    Contains("v_scales must be 4-byte aligned"));
  const LoadedKernel bf16 = fake_kernel(OutputMode::Pool);
  CHECK_THROWS_WITH(materialize_pool(bf16, a.in, po, nullptr), Contains("fp8 caches only"));
}

TEST_CASE("paged layouts: strides, overlap and per-layer slot mappings are checked",
          "[materialize]") {
  Args a;  // H = 8, D = 128, bf16: vectors of 8 elements
  LoadedKernel flat = fake_kernel(OutputMode::Pool);
  LoadedKernel k = fake_kernel(OutputMode::Pool);
  k.spec.paged = true;
  std::vector<void*> kbuf(5, addr(0x70000000)), vbuf(5, addr(0x80000000));
  PoolOutput base;
  base.cache_loc = addr(0x90000000);
  base.k_buffers = kbuf;
  base.v_buffers = vbuf;
  base.num_slots = 16 * 64;
  base.block_size = 16;
  auto ok = [&](const PoolOutput& o) {  // past every check: the launch needs a driver
    CHECK_THROWS_AS(materialize_pool(k, a.in, o, nullptr), CudaError);
  };
  auto expect = [&](const LoadedKernel& kk, const PoolOutput& o, const char* text) {
    CHECK_THROWS_AS(materialize_pool(kk, a.in, o, nullptr), ArgumentError);
    CHECK_THROWS_WITH(materialize_pool(kk, a.in, o, nullptr), Contains(text));
  };
  ok(base);  // vLLM NHD [num_blocks, 16, 8, 128], defaults
  PoolOutput o = base;
  o.block_stride = 2 * 16 * 1024;  // FlashInfer NHD [num_blocks, 2, 16, 8, 128]
  ok(o);
  o.slot_stride = 128, o.head_stride = 16 * 128;  // FlashInfer HND [num_blocks, 2, 8, 16, 128]
  ok(o);
  o = base;
  o.slot_stride = 128;  // heads of a slot at D apart, slots at D apart: overlap
  expect(k, o, "the paged layout overlaps itself");
  o = base;
  o.head_stride = 64;
  expect(k, o, "the paged layout overlaps itself");
  o = base;
  o.block_stride = 16 * 1024 - 8;
  expect(k, o, "block_stride 16376 is smaller than one block's extent 16384 elements");
  o = base;
  o.slot_stride = 128, o.head_stride = 16 * 128 + 4;
  expect(k, o, "must be multiples of 8 elements");
  o = base;
  o.block_size = -2;
  expect(k, o, "block_size must be >= 1");
  // The flat kernel refuses paged fields instead of ignoring them.
  expect(flat, base, "need a paged kernel: prepare a spec with paged=true");

  // Per-layer slot mappings: one per layer; a null entry falls back to cache_loc.
  std::vector<const void*> maps(5, addr(0xd0000000));
  o = base;
  o.slot_mappings = maps;
  o.cache_loc = nullptr;
  ok(o);
  std::vector<const void*> four(4, addr(0xd0000000));
  o.slot_mappings = four;
  expect(k, o, "slot_mappings has 4 entries for 5 layers");
  maps[2] = nullptr;
  o.slot_mappings = maps;
  expect(k, o, "cache_loc is null");
  maps[2] = addr(0xd0000004);
  o.slot_mappings = maps;
  expect(k, o, "slot_mappings[l] must be 8-byte aligned");
  PoolOutput f = base;
  f.block_size = 0;
  std::vector<const void*> five(5, addr(0xd0000000));
  f.slot_mappings = five;
  expect(flat, f, "need a paged kernel");
}

TEST_CASE("valid arguments reach the launch; T = 0 launches nothing", "[materialize]") {
  const LoadedKernel k = fake_kernel(OutputMode::Stacked);
  const StackedOutput out{addr(0x50000000), addr(0x60000000)};
  Args a;
  a.in.num_tokens = 0;
  CHECK_NOTHROW(materialize_stacked(k, a.in, out, nullptr));  // no launch, no driver needed
  a.in.num_tokens = 16;
  // Past every check: launching needs the driver, absent here (or a real function, which the
  // fake kernel does not have).
  CHECK_THROWS_AS(materialize_stacked(k, a.in, out, nullptr), CudaError);
}
