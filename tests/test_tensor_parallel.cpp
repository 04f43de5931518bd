// Tensor parallelism on the config path (validate.hpp): how KV heads split across ranks, the
// errors for degrees that do not split, and the per-rank plans and kernel specs.
#include <catch2/catch.hpp>
#include <set>

#include "fkv/config.hpp"
#include "fkv/errors.hpp"
#include "fkv/spec.hpp"
#include "fkv/validate.hpp"

using namespace fkv;
using Catch::Contains;

TEST_CASE("KV heads split evenly across ranks", "[validate][tp]") {
  for (int tp : {1, 2, 4, 8}) {
    std::set<int> seen;
    for (int r = 0; r < tp; ++r) {
      const KVHeadShard s = kv_head_shard(8, {tp, r});
      CHECK(s.num_heads == 8 / tp);
      CHECK(s.first_head == r * 8 / tp);
      CHECK(s.total_heads == 8);
      CHECK_FALSE(s.replicated);
      for (int h = s.first_head; h < s.first_head + s.num_heads; ++h) CHECK(seen.insert(h).second);
    }
    CHECK(seen.size() == 8);  // every head on exactly one rank
  }
}

TEST_CASE("fewer KV heads than ranks: one replicated head per rank", "[validate][tp]") {
  // 2 heads over 8 ranks: ranks 0-3 hold head 0, ranks 4-7 head 1 (r * H / tp), as sglang/vLLM.
  for (int r = 0; r < 8; ++r) {
    const KVHeadShard s = kv_head_shard(2, {8, r});
    CHECK(s.num_heads == 1);
    CHECK(s.first_head == (r < 4 ? 0 : 1));
    CHECK(s.replicated);
  }
  CHECK(kv_head_shard(1, {4, 3}).first_head == 0);
}

TEST_CASE("degrees that do not split are a ConfigError naming both numbers", "[validate][tp]") {
  CHECK_THROWS_AS(kv_head_shard(6, {4, 0}), ConfigError);
  CHECK_THROWS_WITH(kv_head_shard(6, {4, 0}), Contains("num_kv_heads=6") && Contains("tp_size=4"));
  CHECK_THROWS_WITH(kv_head_shard(3, {4, 1}), Contains("num_kv_heads=3") && Contains("tp_size=4"));
  CHECK_THROWS_WITH(kv_head_shard(8, {3, 0}),
                    Contains("num_kv_heads=8 cannot be split across tp_size=3"));
  CHECK_THROWS_AS(kv_head_shard(8, {0, 0}), ArgumentError);
  CHECK_THROWS_WITH(kv_head_shard(8, {2, 2}), Contains("tp_rank 2 is outside [0, tp_size=2)"));
  CHECK_THROWS_AS(kv_head_shard(8, {2, -1}), ArgumentError);
}

TEST_CASE("a rank's plan has its share of the heads; its kernels follow", "[validate][tp]") {
  const ModelConfig config =
      ModelConfig::from_file(FKV_TEST_DATA_DIR "/dflash-qwen3-4b-draft.json");
  const Plan full = make_plan(config);
  REQUIRE(full.groups.size() == 1);
  const int H = full.groups[0].attn.num_kv_heads;
  CHECK(full.groups[0].heads.num_heads == H);
  CHECK(full.groups[0].heads.total_heads == H);
  CHECK(full.tp_size == 1);
  const Plan rank1 = shard_plan(full, {2, 1});
  CHECK(rank1.tp_size == 2);
  CHECK(rank1.tp_rank == 1);
  CHECK(rank1.groups[0].attn.num_kv_heads == H / 2);
  CHECK(rank1.groups[0].heads.first_head == H / 2);
  CHECK(rank1.groups[0].layers == full.groups[0].layers);
  const auto specs = kernel_specs_for(rank1, VariantOptions{});
  REQUIRE_FALSE(specs.empty());
  for (const KernelSpec& s : specs) CHECK(s.num_kv_heads == H / 2);
  CHECK_THROWS_AS(shard_plan(rank1, {2, 0}), ArgumentError);  // already sharded
  CHECK(shard_plan(full, {1, 0}).groups[0].attn == full.groups[0].attn);
}
