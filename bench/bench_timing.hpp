// bench_timing.hpp: the GPU timing method of the C++ benches (fkv_bench, decode_bench), the
// same as bench_gpu.py's, so that their figures compare:
//   - two calls of the body outside any capture (errors surface there, not inside a capture);
//   - `calls` back-to-back calls captured in one CUDA graph, three warm-up replays;
//   - one sample = one replay between two CUDA events, divided by `calls`;
//   - 20..200 samples, as many as fit in about `target_ms` of replays; the median is the figure.
// Header-only: each bench is one translation unit.
#pragma once

#include <algorithm>
#include <cstddef>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "fkv/driver.hpp"

namespace fkv_bench {

// Order statistics of per-call samples (microseconds), as the benches' JSON reports them.
inline nlohmann::json stats(std::vector<double> us, int calls, const std::string& method) {
  std::sort(us.begin(), us.end());
  double sum = 0;
  for (double x : us) sum += x;
  const std::size_t n = us.size();
  return {{"median_us", us[n / 2]},     {"mean_us", sum / double(n)},
          {"min_us", us.front()},       {"p10_us", us[n / 10]},
          {"p90_us", us[(n * 9) / 10]}, {"samples", n},
          {"calls_per_sample", calls},  {"method", method}};
}

// RAII: a captured graph and its executable.
struct GraphExec {
  CUgraph graph = nullptr;
  CUgraphExec exec = nullptr;
  GraphExec() = default;
  GraphExec(const GraphExec&) = delete;
  GraphExec& operator=(const GraphExec&) = delete;
  ~GraphExec() {
    auto& drv = fkv::Driver::get();
    if (exec) drv.cuGraphExecDestroy(exec);
    if (graph) drv.cuGraphDestroy(graph);
  }
};

// Median (and spread) of the per-call GPU time of `body` on stream `s`, by the method above;
// `body` must only enqueue work on the stream it is given.
inline nlohmann::json time_graph(CUstream s, const std::function<void(CUstream)>& body, int calls,
                                 double target_ms) {
  auto& drv = fkv::Driver::get();
  body(s);
  body(s);
  FKV_CU(cuStreamSynchronize, s);

  GraphExec g;
  FKV_CU(cuStreamBeginCapture, s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
  try {
    for (int i = 0; i < calls; ++i) body(s);
  } catch (...) {  // end the capture, or the stream stays unusable
    CUgraph broken = nullptr;
    drv.cuStreamEndCapture(s, &broken);
    if (broken) drv.cuGraphDestroy(broken);
    throw;
  }
  FKV_CU(cuStreamEndCapture, s, &g.graph);
  FKV_CU(cuGraphInstantiate, &g.exec, g.graph, 0);

  for (int i = 0; i < 3; ++i) FKV_CU(cuGraphLaunch, g.exec, s);
  FKV_CU(cuStreamSynchronize, s);

  fkv::Event start, stop;
  auto replay_ms = [&] {
    FKV_CU(cuEventRecord, start.get(), s);
    FKV_CU(cuGraphLaunch, g.exec, s);
    FKV_CU(cuEventRecord, stop.get(), s);
    FKV_CU(cuEventSynchronize, stop.get());
    float ms = 0;
    FKV_CU(cuEventElapsedTime, &ms, start.get(), stop.get());
    return double(ms);
  };
  const double once = std::max(replay_ms(), 1e-3);
  const int n = std::clamp(int(target_ms / once), 20, 200);
  std::vector<double> us;
  for (int i = 0; i < n; ++i) us.push_back(replay_ms() * 1e3 / calls);
  return stats(std::move(us), calls, "cuda_graph");
}

}  // namespace fkv_bench
