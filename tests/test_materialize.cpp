// materialize without a GPU: the host-side argument checks (each names the argument and the fix)
// and the launch geometry. A call that passes every check reaches the launch, which needs a
// driver: here that is a CudaError, proving the checks let it through.
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
  k.spec.k_norm = true;
  k.spec.mode = mode;
  k.spec.cache = cache;
  k.tiling = k.spec.tiling();
  k.sm_count = 132;
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
  CHECK_THROWS_WITH(materialize_stacked(pool, a.in, out, nullptr), Contains("prepared for pool output"));
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

TEST_CASE("launch geometry covers every (token, head) pair and fills the GPU", "[materialize]") {
  const LoadedKernel k = fake_kernel(OutputMode::Stacked);
  const Tiling& t = k.tiling;
  for (std::int64_t T : {1, 7, 8, 64, 512, 4096, 70000}) {
    for (int L : {1, 5, 8}) {
      const LaunchPlan lp = plan_launch(k, T, L);
      INFO("T=" << T << " L=" << L);
      CHECK(std::int64_t{lp.grid_x} * t.heads_per_block >= T * k.spec.num_kv_heads);
      CHECK(std::int64_t{lp.grid_x - 1} * t.heads_per_block < T * k.spec.num_kv_heads);
      CHECK(lp.grid_y * lp.layers_per_block >= static_cast<unsigned>(L));
      CHECK((lp.grid_y - 1) * lp.layers_per_block < static_cast<unsigned>(L));
      CHECK(lp.grid_z == 1);
    }
  }
  // Decode: 8 tokens x 5 layers split the layers over blocks; 4096 tokens keep them together.
  CHECK(plan_launch(k, 8, 5).layers_per_block == 1);
  CHECK(plan_launch(k, 4096, 5).layers_per_block == 5);
}
