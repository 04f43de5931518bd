// Routes spdlog's default logger (warnings and up) into a ring buffer while alive, so a test
// can check what the library reported.
#pragma once

#include <spdlog/sinks/ringbuffer_sink.h>
#include <spdlog/spdlog.h>

#include <memory>
#include <string>

namespace fkv_test {

struct LogCapture {
  std::shared_ptr<spdlog::sinks::ringbuffer_sink_mt> sink =
      std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(512);
  std::shared_ptr<spdlog::logger> previous = spdlog::default_logger();
  LogCapture() {
    auto logger = std::make_shared<spdlog::logger>("test", sink);
    logger->set_level(spdlog::level::warn);
    logger->set_pattern("%l %v");
    spdlog::set_default_logger(logger);
  }
  ~LogCapture() { spdlog::set_default_logger(previous); }
  LogCapture(const LogCapture&) = delete;
  LogCapture& operator=(const LogCapture&) = delete;

  // Lines containing `needle`.
  int count(const std::string& needle) const {
    int n = 0;
    for (const auto& line : sink->last_formatted())
      if (line.find(needle) != std::string::npos) ++n;
    return n;
  }
  int warnings() const { return count("warning "); }
  std::string text() const {
    std::string all;
    for (const auto& line : sink->last_formatted()) all += line;
    return all;
  }
  bool has(const std::string& needle) const { return text().find(needle) != std::string::npos; }
};

}  // namespace fkv_test
