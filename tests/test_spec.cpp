#include <catch2/catch.hpp>
#include <set>

#include "fkv/errors.hpp"
#include "fkv/spec.hpp"

using namespace fkv;

static KernelSpec base() {
  KernelSpec s;
  s.num_kv_heads = 8;
  s.head_dim = 128;
  s.rotary_dim = 128;
  s.k_norm = KNormKind::Rms;
  return s;
}

TEST_CASE("canonical text changes with every field", "[spec]") {
  const KernelSpec b = base();
  std::vector<KernelSpec> variants;
  auto v = b;
  v.num_kv_heads = 4;
  variants.push_back(v);
  v = b;
  v.head_dim = 256;
  variants.push_back(v);
  v = b;
  v.rotary_dim = 64;
  variants.push_back(v);
  v = b;
  v.neox = false;
  variants.push_back(v);
  v = b;
  v.k_norm = KNormKind::None;
  variants.push_back(v);
  v = b;
  v.act = DType::FP16;
  v.cache = DType::FP16;
  variants.push_back(v);
  v = b;
  v.cache = DType::FP8_E4M3;
  variants.push_back(v);
  v = b;
  v.cos_sin = DType::BF16;
  variants.push_back(v);
  v = b;
  v.positions = IndexType::I32;
  variants.push_back(v);
  v = b;
  v.slots = IndexType::I32;
  variants.push_back(v);
  v = b;
  v.mode = OutputMode::Pool;
  variants.push_back(v);
  v = b;
  v.debug_checks = true;
  variants.push_back(v);
  v = b;
  v.kv_bias = true;
  variants.push_back(v);
  v = b;
  v.mode = OutputMode::Pool;
  v.paged = true;
  variants.push_back(v);
  v = b;
  v.mode = OutputMode::Pool;
  v.paged = true;
  v.kv_bias = true;
  variants.push_back(v);
  std::set<std::string> seen{b.canonical()};
  for (const auto& s : variants) {
    INFO(s.canonical());
    CHECK(seen.insert(s.canonical()).second);
    CHECK_FALSE(s == b);
  }
  CHECK(b.canonical() ==
        "H=8;D=128;R=128;neox=1;knorm=1;act=bf16;cache=bf16;cs=fp32;pos=int64;slot=int64;mode="
        "stacked;debug=0");
}

TEST_CASE("tiling invariants hold over head counts, head dims and dtypes", "[spec]") {
  for (DType act : {DType::BF16, DType::FP16, DType::FP32})
    for (int H : {1, 2, 4, 8, 12, 16, 32, 64, 96})
      for (int D : {32, 64, 72, 80, 96, 112, 128, 160, 192, 256, 512})
        for (int R : {0, 16, 32, D / 2 - (D / 2) % 2, D}) {
          KernelSpec s = base();
          s.num_kv_heads = H;
          s.head_dim = D;
          s.rotary_dim = R;
          s.act = s.cache = act;
          for (bool neox : {true, false}) {
            s.neox = neox;
            const Tiling t = s.tiling();
            INFO(s.canonical());
            REQUIRE(t.vec >= 1);
            CHECK(t.vec * dtype_size(act) <= 16);
            CHECK(t.elems_per_thread == t.vec * t.loads);
            CHECK(D % t.elems_per_thread == 0);
            CHECK(t.lanes_per_head * t.elems_per_thread == D);
            CHECK(t.lanes_per_head <= 32);
            CHECK(t.heads_per_warp == 32 / t.lanes_per_head);
            CHECK(t.idle_lanes == 32 - t.heads_per_warp * t.lanes_per_head);
            CHECK(t.idle_lanes * 4 <= 32);  // at most 25% of a warp idle, for every head_dim here
            CHECK(t.block_threads == 32 * t.warps_per_block);
            CHECK(t.heads_per_block == t.heads_per_warp * t.warps_per_block);
            if (R > 0 && !neox) CHECK(t.elems_per_thread % 2 == 0);
          }
        }
}

TEST_CASE("16-byte loads and few idle lanes for the common shapes", "[spec]") {
  KernelSpec s = base();
  Tiling t = s.tiling();
  CHECK(t.vec == 8);
  CHECK(t.loads == 1);
  CHECK(t.lanes_per_head == 16);
  CHECK(t.idle_lanes == 0);
  s.head_dim = 256;
  s.rotary_dim = 64;
  t = s.tiling();
  CHECK(t.vec == 8);
  CHECK(t.lanes_per_head == 32);
  s.head_dim = 80;
  s.rotary_dim = 32;
  t = s.tiling();
  CHECK(t.vec == 8);
  CHECK(t.idle_lanes == 2);  // 3 heads of 10 lanes per warp
  s.head_dim = 96;
  s.rotary_dim = 96;
  t = s.tiling();
  CHECK(t.vec == 8);
  CHECK(t.loads == 2);  // 6 lanes of 16 elements: 5 heads per warp
  CHECK(t.idle_lanes == 2);
  s.head_dim = 512;
  s.rotary_dim = 64;
  t = s.tiling();
  CHECK(t.lanes_per_head == 32);
  CHECK(t.loads == 2);
  s.act = s.cache = DType::FP32;
  s.head_dim = 256;
  t = s.tiling();
  CHECK(t.vec == 4);
  CHECK(t.lanes_per_head == 32);
}

TEST_CASE("tiling takes its tuning knobs from the JitOptions it is given", "[spec][options]") {
  const KernelSpec s = base();
  JitOptions o;
  Tiling t = s.tiling(o);
  CHECK(t.warps_per_block == 2);  // the default
  CHECK(t.fixed_layers_per_block == 0);
  o.block_warps = 8;
  o.layers_per_block = 3;
  t = s.tiling(o);
  CHECK(t.warps_per_block == 8);
  CHECK(t.block_threads == 256);
  CHECK(t.heads_per_block == 8 * t.heads_per_warp);
  CHECK(t.fixed_layers_per_block == 3);
  CHECK(t.vec == s.tiling(JitOptions{}).vec);  // the knobs leave the lane split alone
}

TEST_CASE("launch grid covers every (token, head) pair and layer, and fills the GPU", "[spec]") {
  for (int H : {1, 8, 32}) {
    KernelSpec s = base();
    s.num_kv_heads = H;
    for (int warps : {1, 2, 4}) {
      JitOptions o;
      o.block_warps = warps;
      const Tiling t = s.tiling(o);
      for (std::int64_t T : {1, 7, 8, 64, 512, 4096, 70000}) {
        for (int L : {1, 5, 8, 32}) {
          const LaunchGrid g = launch_grid(s, t, 132 * 16, T, L);
          INFO("H=" << H << " warps=" << warps << " T=" << T << " L=" << L);
          CHECK(std::int64_t{g.x} * t.heads_per_block >= T * H);
          CHECK(std::int64_t{g.x - 1} * t.heads_per_block < T * H);
          CHECK(g.layers_per_block >= 1);
          CHECK(g.y * g.layers_per_block >= static_cast<unsigned>(L));
          CHECK((g.y - 1) * g.layers_per_block < static_cast<unsigned>(L));
          CHECK(g.z == 1);
          // The smallest chunk that fits in one wave, or every layer when none does.
          if (std::int64_t{g.x} * g.y > 132 * 16) CHECK(g.layers_per_block == L);
          if (g.layers_per_block > 1) {
            const int smaller = g.layers_per_block - 1;
            CHECK(std::int64_t{g.x} * ((L + smaller - 1) / smaller) > 132 * 16);
          }
        }
      }
    }
  }
  const KernelSpec s = base();
  const Tiling t = s.tiling(JitOptions{});
  REQUIRE(t.heads_per_block == 4);
  const std::int64_t h200 = 132 * 16;  // 132 SMs x 16 resident blocks of 64 threads (64 registers)
  // Decode: 8 tokens x 8 heads = 16 blocks; one layer per block (80 blocks) fits one wave.
  CHECK(launch_grid(s, t, h200, 8, 5).layers_per_block == 1);
  CHECK(launch_grid(s, t, h200, 8, 5).y == 5);
  // 512 tokens = 1024 blocks: chunks of 1 (5120 blocks) and 2 (3072) exceed one wave of 2112,
  // chunks of 3 (2 x 1024 = 2048) fit: the split measured fastest on the H200.
  CHECK(launch_grid(s, t, h200, 512, 5).layers_per_block == 3);
  CHECK(launch_grid(s, t, h200, 512, 5).y == 2);
  // 4096 tokens = 8192 blocks, over a wave already: the layers stay together.
  CHECK(launch_grid(s, t, h200, 4096, 5).layers_per_block == 5);
  // The wave is the kernel's: twice the residency (32 blocks per SM) takes chunks of 2.
  CHECK(launch_grid(s, t, 132 * 32, 512, 5).layers_per_block == 2);
  CHECK(launch_grid(s, t, 1, 2048, 8).layers_per_block == 8);  // a 1-block device is full already
  CHECK(launch_grid(s, t, 0, 8, 5).layers_per_block == 5);     // no residency known: no split
  // Nothing to launch.
  const LaunchGrid none = launch_grid(s, t, h200, 0, 5);
  CHECK((none.x == 0 && none.y == 0 && none.z == 0));
}

TEST_CASE("FKV_LAYERS_PER_BLOCK pins the layer chunk for every call size", "[spec][options]") {
  const KernelSpec s = base();
  JitOptions o;
  o.layers_per_block = 2;
  const Tiling t = s.tiling(o);
  for (std::int64_t T : {1, 8, 4096}) {
    const LaunchGrid g = launch_grid(s, t, 132 * 16, T, 5);
    INFO("T=" << T);
    CHECK(g.layers_per_block == 2);
    CHECK(g.y == 3);
  }
  CHECK(launch_grid(s, t, 132 * 16, 8, 1).layers_per_block == 1);  // never more than the call has
}

TEST_CASE("invalid specs are refused with the fix", "[spec]") {
  KernelSpec s = base();
  s.rotary_dim = 130;
  CHECK_THROWS_MATCHES(
      s.check(), ConfigError,
      Catch::Message("Invalid fused KV rotary/head dim pair: rotary_dim=130, head_dim=128."));
  s.rotary_dim = 63;
  CHECK_THROWS_AS(s.check(), ConfigError);
  s = base();
  s.cache = DType::FP16;
  CHECK_THROWS_WITH(s.check(), Catch::Contains("fp8_e4m3"));
  s = base();
  s.cos_sin = DType::FP16;
  CHECK_THROWS_WITH(s.check(), Catch::Contains("fp32 or the activation dtype"));
  s = base();
  s.num_kv_heads = 0;
  CHECK_THROWS_AS(s.check(), ArgumentError);
  s = base();
  s.head_dim = 8192;
  s.rotary_dim = 0;
  CHECK_THROWS_WITH(s.check(), Catch::Contains("one warp"));
  s = base();
  s.head_dim = 127;
  s.rotary_dim = 0;
  CHECK_THROWS_WITH(s.check(), Catch::Contains("odd"));
  CHECK_THROWS_WITH(parse_dtype("int8"), Catch::Contains("bf16"));
  CHECK(parse_dtype("bfloat16") == DType::BF16);
  CHECK(parse_dtype("float8_e4m3fn") == DType::FP8_E4M3);
}

TEST_CASE("specs too large for the kernels' 32-bit indexes are refused", "[spec][limits]") {
  // Issue 23 item 12: the kernels compute constexpr int KV = H * D (and the decode kernel
  // layers * 2 * KV); 16777216 x 128 wrapped to 0 and compiled with only a warning.
  KernelSpec s = base();
  s.num_kv_heads = 16777216;
  CHECK_THROWS_AS(s.check(), ArgumentError);
  CHECK_THROWS_WITH(s.check(),
                    Catch::Contains("num_kv_heads * head_dim = 16777216 * 128 = 2147483648"));
  s.num_kv_heads = 1 << 30;  // 2^37 elements: no 32-bit product in the check itself
  CHECK_THROWS_AS(s.check(), ArgumentError);
  // The bound leaves room for every layer of a model, K and V, in one int.
  CHECK(2 * static_cast<std::int64_t>(kMaxLayers) * kMaxHeadElements <= 2147483647);
  s.num_kv_heads = static_cast<int>(kMaxHeadElements / s.head_dim);
  CHECK_NOTHROW(s.check());
  s.num_kv_heads += 1;
  CHECK_THROWS_AS(s.check(), ArgumentError);
  s = base();
  s.head_dim = 1 << 20;  // head_dim alone over the bound is refused by the same check
  s.num_kv_heads = 1;
  s.rotary_dim = 0;
  CHECK_THROWS_WITH(s.check(), Catch::Contains("more than the kernels can index"));
}

TEST_CASE("kernel_specs_for gives one spec per group and mode", "[spec]") {
  Plan plan;
  AttentionSpec a;
  a.num_kv_heads = 8;
  a.head_dim = 128;
  a.rotary_dim = 128;
  a.k_norm = KNormKind::Rms;
  plan.groups.push_back({a, {0, 1, 2}});
  AttentionSpec b = a;
  b.rotary_dim = 0;
  plan.groups.push_back({b, {3}});
  VariantOptions o;
  auto specs = kernel_specs_for(plan, o);
  REQUIRE(specs.size() == 4);
  CHECK(specs[0].mode == OutputMode::Stacked);
  CHECK(specs[1].mode == OutputMode::Pool);
  CHECK(specs[2].rotary_dim == 0);
  CHECK(specs[0].k_norm == KNormKind::Rms);
  o.pool = false;
  CHECK(kernel_specs_for(plan, o).size() == 2);
  CHECK(act_dtype_of("float16") == DType::FP16);
  CHECK(act_dtype_of("") == DType::BF16);
}

TEST_CASE("paged and bias specs: names, keys and checks", "[spec]") {
  KernelSpec s = base();
  s.mode = OutputMode::Pool;
  s.paged = true;
  s.kv_bias = true;
  // Appended only when set, so the keys of existing specs stay what they were.
  CHECK(s.canonical() ==
        "H=8;D=128;R=128;neox=1;knorm=1;act=bf16;cache=bf16;cs=fp32;pos=int64;slot=int64;"
        "mode=pool;debug=0;paged=1;bias=1");
  CHECK(s.short_name() == "fkv_h8_d128_r128_neox_kn_bf16_bf16_pool_paged_bias");
  CHECK_NOTHROW(s.check());
  s.mode = OutputMode::Stacked;  // a paged layout is a pool layout
  CHECK_THROWS_AS(s.check(), ArgumentError);
  CHECK_THROWS_WITH(s.check(), Catch::Contains("a paged layout is a pool layout"));
  s.paged = false;  // bias works with stacked output
  CHECK_NOTHROW(s.check());
}
