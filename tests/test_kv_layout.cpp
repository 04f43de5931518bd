// kv_layout: the output-layout descriptor's checks, defaults and per-layer pointers (no GPU:
// only addresses are compared).
#include <catch2/catch.hpp>
#include <cstdint>
#include <vector>

#include "fkv/errors.hpp"
#include "fkv/kv_layout.hpp"

using namespace fkv;
using Catch::Contains;

namespace {

void* addr(std::uintptr_t a) { return reinterpret_cast<void*>(a); }

// 5 layers, H = 8, D = 128, bf16, 16-byte vectors.
KVGeometry geometry() {
  KVGeometry g;
  g.num_layers = 5;
  g.num_kv_heads = 8;
  g.head_dim = 128;
  g.cache = DType::BF16;
  g.vec = 8;
  return g;
}

KVLayout token_major() {
  KVLayout l;
  l.kind = KVLayoutKind::TokenMajor;
  l.base = addr(0x10000000);
  l.cache_loc = addr(0x20000000);
  l.num_slots = 64;
  return l;
}

void expect_error(const KVLayout& l, const KVGeometry& g, const std::string& text) {
  CHECK_THROWS_AS(resolve_kv_layout(l, g), ArgumentError);
  CHECK_THROWS_WITH(resolve_kv_layout(l, g), Contains(text));
}

}  // namespace

TEST_CASE("kinds by name", "[kv_layout]") {
  CHECK(parse_kv_layout_kind("token_major") == KVLayoutKind::TokenMajor);
  CHECK(parse_kv_layout_kind("token-major") == KVLayoutKind::TokenMajor);
  CHECK(parse_kv_layout_kind("flat") == KVLayoutKind::PerLayer);
  CHECK(parse_kv_layout_kind("paged") == KVLayoutKind::PerLayer);
  CHECK(parse_kv_layout_kind("stacked") == KVLayoutKind::Stacked);
  for (KVLayoutKind k : {KVLayoutKind::PerLayer, KVLayoutKind::TokenMajor, KVLayoutKind::Stacked})
    CHECK(parse_kv_layout_kind(to_string(k)) == k);
  CHECK_THROWS_WITH(parse_kv_layout_kind("layer_major"),
                    Contains("unknown KV layout 'layer_major': use per_layer"));
  KVLayout l;
  set_kv_layout_field(l, "layer_stride", 4096);
  set_kv_layout_field(l, "kv_offset", 1024);
  CHECK(l.layer_stride == 4096);
  CHECK(l.kv_offset == 1024);
  CHECK_THROWS_WITH(set_kv_layout_field(l, "row_stride", 1),
                    Contains("unknown KV layout field 'row_stride': the fields are "
                             "num_slots, slot_stride"));
}

TEST_CASE("token_major: defaults, per-layer pointers and extent", "[kv_layout]") {
  const KVGeometry g = geometry();
  const KVLayout l = token_major();
  const KVAddressing a = resolve_kv_layout(l, g);
  CHECK(a.slot_stride == 5 * 2 * 1024);  // every layer's K and V of one slot
  CHECK(a.block_size == 1);
  CHECK(a.block_stride == a.slot_stride);
  CHECK(a.head_stride == 128);
  CHECK_FALSE(a.paged);  // heads contiguous: the flat kernels and the decode path take it
  // Layer 3's K at 3 * 2048 elements, its V 1024 further (bf16: 2 bytes).
  CHECK(kv_layer_buffer(l, g, 3, false) == addr(0x10000000 + 3 * 2048 * 2));
  CHECK(kv_layer_buffer(l, g, 3, true) == addr(0x10000000 + (3 * 2048 + 1024) * 2));
  CHECK(kv_layout_extent(l, g) == 64 * 5 * 2048);

  // V of every layer after the K of every layer, rows padded: another nesting, still disjoint.
  KVLayout kv_outer = l;
  kv_outer.layer_stride = 1024;
  kv_outer.kv_offset = 5 * 1024;
  kv_outer.slot_stride = 10 * 1024 + 64;
  const KVAddressing b = resolve_kv_layout(kv_outer, g);
  CHECK(b.slot_stride == 10 * 1024 + 64);
  CHECK(kv_layer_buffer(kv_outer, g, 4, true) == addr(0x10000000 + (4 * 1024 + 5 * 1024) * 2));
  CHECK(kv_layout_extent(kv_outer, g) == 63 * (10 * 1024 + 64) + 10 * 1024);

  // Heads of a layer apart: a paged kernel's addressing.
  KVLayout spread = l;
  spread.head_stride = 256;
  spread.kv_offset = 8 * 256;
  spread.layer_stride = 2 * 8 * 256;
  CHECK(resolve_kv_layout(spread, g).paged);

  // As one group's per-layer layout (what the materializer hands each group's kernel).
  std::vector<void*> k(5), v(5);
  for (int i = 0; i < 5; ++i) {
    k[static_cast<std::size_t>(i)] = kv_layer_buffer(l, g, i, false);
    v[static_cast<std::size_t>(i)] = kv_layer_buffer(l, g, i, true);
  }
  const KVLayout view = per_layer_view(l, a, k, v);
  CHECK(view.kind == KVLayoutKind::PerLayer);
  const KVAddressing va = resolve_kv_layout(view, g);
  CHECK(va.slot_stride == a.slot_stride);
  CHECK_FALSE(va.paged);
  CHECK(kv_layer_buffer(view, g, 2, true) == kv_layer_buffer(l, g, 2, true));
}

TEST_CASE("token_major: errors name the field and the fix", "[kv_layout]") {
  const KVGeometry g = geometry();
  KVLayout l = token_major();
  l.base = nullptr;
  expect_error(l, g, "token_major layout: base is null");
  l = token_major();
  l.base = addr(0x10000008);
  expect_error(l, g, "base must be 16-byte aligned");
  l = token_major();
  std::vector<void*> bufs(5, addr(0x30000000));
  l.k_buffers = bufs;
  l.v_buffers = bufs;
  expect_error(l, g, "k_buffers / v_buffers are for per_layer layouts");
  l = token_major();
  l.block_size = 16;
  expect_error(l, g, "block_size and block_stride are for paged per_layer layouts");
  l = token_major();
  l.layer_stride = 1024;  // K and V of one layer take 2048
  expect_error(l, g,
               "the token_major layout overlaps itself: layer_stride 1024 is smaller than the "
               "2048 elements spanned by D, head_stride, kv_offset");
  l = token_major();
  l.slot_stride = 4 * 2048;  // one layer short
  expect_error(l, g, "slot_stride 8192 is smaller than the 10240 elements");
  l = token_major();
  l.kv_offset = 1028;  // past K's 1024 elements, but not a whole 16-byte vector
  expect_error(l, g, "kv_offset 1028 must be a multiple of 8 elements");
  l = token_major();
  l.head_stride = -128;
  expect_error(l, g, "head_stride must be > 0, got -128");
  l = token_major();
  l.num_slots = 0;
  expect_error(l, g, "num_slots must be > 0");
  l = token_major();
  l.cache_loc = nullptr;
  expect_error(l, g, "cache_loc is null");
  l = token_major();
  std::vector<float> scales(5, 0.5f);
  l.k_scales = scales;
  expect_error(l, g, "k/v scales apply to fp8 caches only; the cache dtype is bf16");
  KVGeometry fp8 = g;
  fp8.cache = DType::FP8_E4M3;
  fp8.vec = 16;
  CHECK_NOTHROW(resolve_kv_layout(l, fp8));
  std::vector<float> four(4, 0.5f);
  l.k_scales = four;
  expect_error(l, fp8, "k_scales has 4 values for 5 layers");
}

TEST_CASE("per_layer and stacked: the kinds' own fields are refused elsewhere", "[kv_layout]") {
  const KVGeometry g = geometry();
  std::vector<void*> bufs(5, addr(0x30000000));
  KVLayout l;
  l.k_buffers = bufs;
  l.v_buffers = bufs;
  l.cache_loc = addr(0x20000000);
  l.num_slots = 64;
  const KVAddressing a = resolve_kv_layout(l, g);
  CHECK(a.slot_stride == 1024);
  CHECK_FALSE(a.paged);
  CHECK(kv_layer_buffer(l, g, 2, true) == addr(0x30000000));
  l.block_size = 16;
  CHECK(resolve_kv_layout(l, g).paged);
  l.block_size = 0;
  l.layer_stride = 2048;
  expect_error(l, g, "layer_stride and kv_offset are token_major fields; set kind = token_major");
  l.layer_stride = 0;
  l.base = addr(0x10000000);
  expect_error(l, g, "base is for token_major layouts");
  l.base = nullptr;
  l.kind = KVLayoutKind::Stacked;
  expect_error(l, g, "a stacked output has no slots");
}
