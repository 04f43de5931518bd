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
#include "gpu/tp_case.hpp"

namespace {

using namespace fkv_test;

void require_gpu() {
  if (!fkv::Driver::available())
    FAIL(
        "no CUDA driver or device: this test carries the `gpu` label; run `ctest -LE gpu` on "
        "machines without a GPU");
  fkv::ensure_context(0);
}

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

// Stacked K and V of one call, poisoned first.
struct Outputs {
  fkv::DeviceBuffer k, v;
  void* kp = nullptr;
  void* vp = nullptr;
  explicit Outputs(const TpCase& c) {
    const std::size_t bytes =
        static_cast<std::size_t>(c.layers * c.tokens * c.num_kv_heads * c.head_dim * 2);
    k = alloc(bytes);
    v = alloc(bytes);
    kp = k.ptr();
    vp = v.ptr();
  }
  void poison_all(CUstream s) const {
    poison(k, s);
    poison(v, s);
  }
  void run(fkv::FusedKVMaterializer& m, const fkv::MaterializerInput& in, CUstream s) const {
    m.materialize_stacked(in, std::span<void* const>(&kp, 1), std::span<void* const>(&vp, 1), s);
  }
  std::vector<std::uint8_t> both(CUstream s) const {
    std::vector<std::uint8_t> r = download(k, s), rv = download(v, s);
    r.insert(r.end(), rv.begin(), rv.end());
    return r;
  }
};

}  // namespace

TEST_CASE("refresh_weights under a captured graph: replay equals a fresh materializer",
          "[gpu][materializer]") {
  require_gpu();
  TpCase c;
  c.seed = 11;
  const TpHost h1 = make_tp_host(c);
  TpCase c2 = c;
  c2.seed = 12;  // other weights and norms, same shapes (hidden and positions of c2 unused)
  const TpHost h2 = make_tp_host(c2);
  fkv::Stream stream;
  const CUstream s = stream.get();
  const Weights w1(c, h1, s), w2(c, h2, s);

  fkv::FusedKVMaterializer m(config_of(c), c.hidden, w1.w, options(c));
  const fkv::DeviceBuffer hidden = to_device(h1.hidden, s);
  const std::vector<std::uint8_t> pos_bytes = index_bytes(fkv::IndexType::I64, h1.positions);
  const fkv::DeviceBuffer positions = to_device(pos_bytes, s);
  const fkv::MaterializerInput in{hidden.ptr(), c.tokens, 0, positions.ptr()};
  Outputs out(c);
  out.run(m, in, s);  // warm-up: the GEMM's algorithm for this T is chosen outside capture
  const std::vector<std::uint8_t> before = out.both(s);

  CUgraph graph = nullptr;
  FKV_CU(cuStreamBeginCapture, s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
  out.run(m, in, s);
  FKV_CU(cuStreamEndCapture, s, &graph);
  const GraphExec exec(graph);

  const CUdeviceptr packed = m.packed_weights(), norms = m.k_norm_weights(0);
  m.refresh_weights(w2.w, s);
  CHECK(m.packed_weights() == packed);
  CHECK(m.k_norm_weights(0) == norms);
  out.poison_all(s);
  exec.launch(s);
  const std::vector<std::uint8_t> replayed = out.both(s);
  std::size_t poisoned = 0;  // bf16 elements still 0xffff: not written by the replay
  for (std::size_t i = 0; i + 1 < replayed.size(); i += 2)
    poisoned += replayed[i] == kPoison && replayed[i + 1] == kPoison;
  CHECK(poisoned == 0);
  CHECK(replayed != before);

  fkv::FusedKVMaterializer fresh(config_of(c), c.hidden, w2.w, options(c));
  out.poison_all(s);
  out.run(fresh, in, s);
  CHECK(out.both(s) == replayed);
  CHECK(m.take_error_flag(s) == 0);

  // Refusals change nothing: a missing bias, a changed eps.
  fkv::MaterializerWeights no_bias = w2.w;
  no_bias.kv_bias.clear();
  CHECK_THROWS_AS(m.refresh_weights(no_bias, s), fkv::ArgumentError);
  fkv::MaterializerWeights other_eps = w1.w;
  other_eps.eps.assign(static_cast<std::size_t>(c.layers), 1e-5f);
  CHECK_THROWS_WITH(m.refresh_weights(other_eps, s), Catch::Contains("eps of layer 0 changed"));
  out.poison_all(s);
  exec.launch(s);
  CHECK(out.both(s) == replayed);
}

TEST_CASE("external cos/sin tables: the caller's table gives the library's results",
          "[gpu][materializer]") {
  require_gpu();
  TpCase c;
  c.seed = 21;
  c.bias = false;
  const TpHost h = make_tp_host(c);
  fkv::Stream stream;
  const CUstream s = stream.get();
  const Weights w(c, h, s);
  const fkv::DeviceBuffer hidden = to_device(h.hidden, s);
  const std::vector<std::uint8_t> pos_bytes = index_bytes(fkv::IndexType::I64, h.positions);
  const fkv::DeviceBuffer positions = to_device(pos_bytes, s);
  const fkv::MaterializerInput in{hidden.ptr(), c.tokens, 0, positions.ptr()};
  Outputs out(c);

  fkv::FusedKVMaterializer own(config_of(c), c.hidden, w.w, options(c));
  out.poison_all(s);
  out.run(own, in, s);
  const std::vector<std::uint8_t> want = out.both(s);

  // The same table, held by the caller in a padded layout (row stride R + 16).
  const fkv::ModelConfig config = config_of(c);
  const fkv::AttentionSpec attn = fkv::validate(config);
  fkv::RopeOptions ro;
  ro.max_position_embeddings = c.max_position;
  const fkv::RopeTable table(attn.rope, c.head_dim, c.max_position, ro);
  const std::vector<std::uint8_t> bytes = table.bytes(fkv::DType::FP32);
  const std::size_t row = static_cast<std::size_t>(c.head_dim) * 4, padded = row + 64;
  std::vector<std::uint8_t> host(padded * static_cast<std::size_t>(c.max_position), 0);
  for (std::int64_t p = 0; p < c.max_position; ++p)
    std::memcpy(host.data() + static_cast<std::size_t>(p) * padded,
                bytes.data() + static_cast<std::size_t>(p) * row, row);
  const fkv::DeviceBuffer ext = to_device(host, s);

  fkv::MaterializerOptions o = options(c);
  o.external_cos_sin = true;
  o.max_position = 0;
  fkv::FusedKVMaterializer m(config, c.hidden, w.w, o);
  CHECK_THROWS_WITH(out.run(m, in, s), Catch::Contains("call set_cos_sin()"));
  CHECK_THROWS_AS(m.set_cos_sin(0, ext.ptr(), c.max_position, c.head_dim - 2), fkv::ArgumentError);
  CHECK_THROWS_AS(m.set_cos_sin(1, ext.ptr(), c.max_position), fkv::ArgumentError);
  m.set_cos_sin(0, ext.ptr(), c.max_position, static_cast<std::int64_t>(padded / 4));
  out.poison_all(s);
  out.run(m, in, s);
  CHECK(out.both(s) == want);
  CHECK(m.take_error_flag(s) == 0);

  // A shorter table: positions at or past its end are skipped and flagged.
  m.set_cos_sin(0, ext.ptr(), 8, static_cast<std::int64_t>(padded / 4));
  out.run(m, in, s);
  bool past = false;
  for (std::int64_t p : h.positions) past = past || p >= 8;
  CHECK(m.take_error_flag(s) == (past ? 1u : 0u));
}

TEST_CASE("reserve_tokens grows the projection buffer", "[gpu][materializer]") {
  require_gpu();
  TpCase c;
  c.seed = 31;
  const TpHost h = make_tp_host(c);
  fkv::Stream stream;
  const CUstream s = stream.get();
  const Weights w(c, h, s);
  const fkv::DeviceBuffer hidden = to_device(h.hidden, s);
  const std::vector<std::uint8_t> pos_bytes = index_bytes(fkv::IndexType::I64, h.positions);
  const fkv::DeviceBuffer positions = to_device(pos_bytes, s);
  const fkv::MaterializerInput in{hidden.ptr(), c.tokens, 0, positions.ptr()};
  Outputs out(c);

  fkv::FusedKVMaterializer full(config_of(c), c.hidden, w.w, options(c));
  out.run(full, in, s);
  const std::vector<std::uint8_t> want = out.both(s);

  fkv::MaterializerOptions o = options(c);
  o.max_tokens = 4;
  fkv::FusedKVMaterializer m(config_of(c), c.hidden, w.w, o);
  CHECK_THROWS_WITH(out.run(m, in, s), Catch::Contains("max_tokens=4"));
  m.reserve_tokens(2);  // smaller: nothing
  CHECK(m.max_tokens() == 4);
  m.reserve_tokens(c.tokens);
  CHECK(m.max_tokens() == c.tokens);
  out.poison_all(s);
  out.run(m, in, s);
  CHECK(out.both(s) == want);
}
