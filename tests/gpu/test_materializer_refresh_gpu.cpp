// FusedKVMaterializer after construction, on a GPU: refresh_weights() in place under a captured
// CUDA graph, caller-owned cos/sin tables (external_cos_sin + set_cos_sin), reserve_tokens().
//
// Inputs are TpCase's (tests/gpu/tp_case.hpp): exact in the GEMM whatever order cuBLASLt sums
// in, so two materializers given the same weights produce bit-identical K/V, and "refresh +
// replay" can be compared with "a fresh materializer" byte for byte. The float64 reference for
// the same kernels and inputs is test_engine_gpu's tensor-parallel case.
#include <catch2/catch.hpp>
#include <cstring>
#include <string>
#include <vector>

#include "fkv/errors.hpp"
#include "fkv/fused_kv_materializer.hpp"
#include "fkv/rope.hpp"
#include "fkv/validate.hpp"
#include "gpu/gpu_harness.hpp"
#include "gpu/gpu_test.hpp"
#include "gpu/tp_case.hpp"

namespace {

using namespace fkv_test;

// Device copies of one set of weights and the MaterializerWeights pointing at them.
struct Weights {
  std::vector<fkv::DeviceBuffer> w_dev;
  fkv::MaterializerWeights w;
  Weights(const TpCase& c, const TpHost& h, CUstream s) {
    for (int l = 0; l < c.layers; ++l) {
      w_dev.push_back(to_device(h.w_kv[static_cast<std::size_t>(l)], s));
      w.w_kv.push_back(w_dev.back().ptr());
      w.k_norm.push_back(h.k_norm[static_cast<std::size_t>(l)]);
      if (c.bias) w.kv_bias.push_back(h.bias[static_cast<std::size_t>(l)]);
    }
    FKV_CU(cuStreamSynchronize, s);
  }
};

fkv::MaterializerOptions options(const TpCase& c) {
  fkv::MaterializerOptions o;
  o.max_tokens = c.tokens;
  o.max_position = c.max_position;
  o.pool = false;
  return o;
}

fkv::ModelConfig config_of(const TpCase& c) {
  return fkv::ModelConfig::from_json(std::string_view(c.config_json()), "refresh-case");
}

// What each test case starts from: TpCase `c`'s host data (weights and inputs from its seed), a
// stream, the weights and one call's inputs on the device, and that call's stacked K and V.
struct RefreshCase {
  TpCase c;
  TpHost h;
  fkv::Stream stream;
  CUstream s;
  Weights w;
  fkv::DeviceBuffer hidden, positions;
  fkv::MaterializerInput in;
  fkv::DeviceBuffer k, v;
  void* kp = nullptr;
  void* vp = nullptr;

  explicit RefreshCase(const TpCase& tc)
      : c(tc),
        h(make_tp_host(c)),
        s(stream.get()),
        w(c, h, s),
        hidden(to_device(h.hidden, s)),
        positions(to_device(index_bytes(fkv::IndexType::I64, h.positions), s)),
        in{hidden.ptr(), c.tokens, 0, positions.ptr()} {
    const std::size_t bytes =
        static_cast<std::size_t>(c.layers * c.tokens * c.num_kv_heads * c.head_dim * 2);
    k = alloc(bytes);
    v = alloc(bytes);
    kp = k.ptr();
    vp = v.ptr();
  }
  // A materializer for this case's config with weights `weights`.
  fkv::FusedKVMaterializer materializer(const Weights& weights,
                                        const fkv::MaterializerOptions& o) const {
    return fkv::FusedKVMaterializer(config_of(c), c.hidden, weights.w, o);
  }
  void poison_outputs() const {
    poison(k, s);
    poison(v, s);
  }
  void run(fkv::FusedKVMaterializer& m) const {
    m.materialize_stacked(in, std::span<void* const>(&kp, 1), std::span<void* const>(&vp, 1), s);
  }
  // K then V, as bytes.
  std::vector<std::uint8_t> outputs() const {
    std::vector<std::uint8_t> r = download(k, s), rv = download(v, s);
    r.insert(r.end(), rv.begin(), rv.end());
    return r;
  }
};

TpCase tp_case(std::uint64_t seed, bool bias = true) {
  TpCase c;
  c.seed = seed;
  c.bias = bias;
  return c;
}

}  // namespace

TEST_CASE("refresh_weights under a captured graph: replay equals a fresh materializer",
          "[gpu][materializer]") {
  require_gpu();
  const RefreshCase rc(tp_case(11));
  const CUstream s = rc.s;
  // Other weights and norms, same shapes (the hidden states and positions of seed 12 unused).
  const Weights w2(rc.c, make_tp_host(tp_case(12)), s);

  fkv::FusedKVMaterializer m = rc.materializer(rc.w, options(rc.c));
  rc.poison_outputs();
  rc.run(m);  // warm-up: the GEMM's algorithm for this T is chosen outside capture
  const std::vector<std::uint8_t> before = rc.outputs();

  CUgraph graph = nullptr;
  FKV_CU(cuStreamBeginCapture, s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
  rc.run(m);
  FKV_CU(cuStreamEndCapture, s, &graph);
  const GraphExec exec(graph);

  const CUdeviceptr packed = m.packed_weights(), norms = m.k_norm_weights(0);
  m.refresh_weights(w2.w, s);
  CHECK(m.packed_weights() == packed);
  CHECK(m.k_norm_weights(0) == norms);
  rc.poison_outputs();
  exec.launch(s);
  const std::vector<std::uint8_t> replayed = rc.outputs();
  std::size_t poisoned = 0;  // bf16 elements still 0xffff: not written by the replay
  for (std::size_t i = 0; i + 1 < replayed.size(); i += 2)
    poisoned += replayed[i] == kPoison && replayed[i + 1] == kPoison;
  CHECK(poisoned == 0);
  CHECK(replayed != before);

  fkv::FusedKVMaterializer fresh = rc.materializer(w2, options(rc.c));
  rc.poison_outputs();
  rc.run(fresh);
  CHECK(rc.outputs() == replayed);
  CHECK(m.take_error_flag(s) == 0);

  // Refusals change nothing: a missing bias, a changed eps.
  fkv::MaterializerWeights no_bias = w2.w;
  no_bias.kv_bias.clear();
  CHECK_THROWS_AS(m.refresh_weights(no_bias, s), fkv::ArgumentError);
  fkv::MaterializerWeights other_eps = rc.w.w;
  other_eps.eps.assign(static_cast<std::size_t>(rc.c.layers), 1e-5f);
  CHECK_THROWS_WITH(m.refresh_weights(other_eps, s), Catch::Contains("eps of layer 0 changed"));
  rc.poison_outputs();
  exec.launch(s);
  CHECK(rc.outputs() == replayed);
}

TEST_CASE("external cos/sin tables: the caller's table gives the library's results",
          "[gpu][materializer]") {
  require_gpu();
  const RefreshCase rc(tp_case(21, /*bias=*/false));
  const TpCase& c = rc.c;

  fkv::FusedKVMaterializer own = rc.materializer(rc.w, options(c));
  rc.poison_outputs();
  rc.run(own);
  const std::vector<std::uint8_t> want = rc.outputs();

  // The same table, held by the caller in a padded layout (row stride R + 16).
  const fkv::AttentionSpec attn = fkv::validate(config_of(c));
  fkv::RopeOptions ro;
  ro.max_position_embeddings = c.max_position;
  const fkv::RopeTable table(attn.rope, c.head_dim, c.max_position, ro);
  const std::vector<std::uint8_t> bytes = table.bytes(fkv::DType::FP32);
  const std::size_t row = static_cast<std::size_t>(c.head_dim) * 4, padded = row + 64;
  std::vector<std::uint8_t> host(padded * static_cast<std::size_t>(c.max_position), 0);
  for (std::int64_t p = 0; p < c.max_position; ++p)
    std::memcpy(host.data() + static_cast<std::size_t>(p) * padded,
                bytes.data() + static_cast<std::size_t>(p) * row, row);
  const fkv::DeviceBuffer ext = to_device(host, rc.s);

  fkv::MaterializerOptions o = options(c);
  o.external_cos_sin = true;
  o.max_position = 0;
  fkv::FusedKVMaterializer m = rc.materializer(rc.w, o);
  CHECK_THROWS_WITH(rc.run(m), Catch::Contains("call set_cos_sin()"));
  CHECK_THROWS_AS(m.set_cos_sin(0, ext.ptr(), c.max_position, c.head_dim - 2), fkv::ArgumentError);
  CHECK_THROWS_AS(m.set_cos_sin(1, ext.ptr(), c.max_position), fkv::ArgumentError);
  m.set_cos_sin(0, ext.ptr(), c.max_position, static_cast<std::int64_t>(padded / 4));
  rc.poison_outputs();
  rc.run(m);
  CHECK(rc.outputs() == want);
  CHECK(m.take_error_flag(rc.s) == 0);

  // A shorter table: positions at or past its end are skipped and flagged.
  m.set_cos_sin(0, ext.ptr(), 8, static_cast<std::int64_t>(padded / 4));
  rc.run(m);
  bool past = false;
  for (std::int64_t p : rc.h.positions) past = past || p >= 8;
  CHECK(m.take_error_flag(rc.s) == (past ? 1u : 0u));
}

TEST_CASE("reserve_tokens grows the projection buffer", "[gpu][materializer]") {
  require_gpu();
  const RefreshCase rc(tp_case(31));

  fkv::FusedKVMaterializer full = rc.materializer(rc.w, options(rc.c));
  rc.poison_outputs();
  rc.run(full);
  const std::vector<std::uint8_t> want = rc.outputs();

  fkv::MaterializerOptions o = options(rc.c);
  o.max_tokens = 4;
  fkv::FusedKVMaterializer m = rc.materializer(rc.w, o);
  CHECK_THROWS_WITH(rc.run(m), Catch::Contains("max_tokens=4"));
  m.reserve_tokens(2);  // smaller: nothing
  CHECK(m.max_tokens() == 4);
  m.reserve_tokens(rc.c.tokens);
  CHECK(m.max_tokens() == rc.c.tokens);
  rc.poison_outputs();
  rc.run(m);
  CHECK(rc.outputs() == want);
}
