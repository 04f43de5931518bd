// config: JSON access with limits. A config is read only from a regular file of at most
// kMaxConfigBytes, parsed with nesting at most kMaxJsonDepth deep, so that hostile input (a
// device file, a huge file, "[[[[..." thousands deep) gets a ConfigError instead of unbounded
// memory or a stack overflow in the recursive walks later (dump(), canonical()).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "internal.hpp"

namespace fkv::config_detail {
namespace {

// Line and column (1-based) of byte offset `byte` (1-based, as nlohmann reports it).
std::pair<size_t, size_t> line_col(std::string_view text, size_t byte) {
  size_t line = 1, col = 1;
  size_t end = std::min(byte > 0 ? byte - 1 : 0, text.size());
  for (size_t i = 0; i < end; ++i) {
    if (text[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return {line, col};
}

struct TooDeep {};

std::string depth_message(const std::string& name) {
  return name + ": JSON nested more than " + std::to_string(kMaxJsonDepth) +
         " levels deep; no model config needs that many (a corrupt or hostile file?)";
}

}  // namespace

json parse_text(std::string_view text, const std::string& name) {
  if (text.size() > kMaxConfigBytes)
    throw ConfigError(name + ": the config is " + std::to_string(text.size()) + " bytes; at most " +
                      std::to_string(kMaxConfigBytes) + " bytes are read");
  // nlohmann's parser is iterative, but the values it builds are walked recursively later;
  // the callback stops at the first object or array deeper than the limit.
  auto limit = [](int depth, json::parse_event_t event, json&) {
    if ((event == json::parse_event_t::object_start || event == json::parse_event_t::array_start) &&
        depth >= kMaxJsonDepth)
      throw TooDeep{};
    return true;
  };
  try {
    return json::parse(text.begin(), text.end(), limit);
  } catch (const TooDeep&) {
    throw ConfigError(depth_message(name));
  } catch (const json::parse_error& e) {
    auto [line, col] = line_col(text, e.byte);
    std::string what = e.what();
    // nlohmann's text starts with "[json.exception.parse_error.101] parse error at line L, column
    // C: ".
    auto colon = what.find(": ");
    std::string detail = colon != std::string::npos ? what.substr(colon + 2) : what;
    throw ConfigError(name + ": malformed JSON at byte " + std::to_string(e.byte) + " (line " +
                      std::to_string(line) + ", column " + std::to_string(col) + "): " + detail);
  } catch (const json::exception& e) {
    // out_of_range.406: a number that does not fit a double ("1e999"); found by fuzz/fuzz_config.
    std::string what = e.what();
    auto bracket = what.find("] ");
    throw ConfigError(name + ": malformed JSON: " +
                      (bracket != std::string::npos ? what.substr(bracket + 2) : what));
  }
}

void check_depth(const json& root, const std::string& name) {
  // Iterative, so that the check itself cannot overflow the stack.
  std::vector<std::pair<const json*, int>> todo = {{&root, 1}};
  while (!todo.empty()) {
    auto [v, depth] = todo.back();
    todo.pop_back();
    if (!v->is_structured()) continue;
    if (depth > kMaxJsonDepth) throw ConfigError(depth_message(name));
    for (const json& child : *v) todo.push_back({&child, depth + 1});
  }
}

std::string read_file_capped(const std::string& p) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer; fstat then refuses it.
  int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw ConfigError(p + ": cannot read the config: " + std::strerror(errno));
  struct FdCloser {
    int fd;
    ~FdCloser() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0)
    throw ConfigError(p + ": cannot read the config: " + std::strerror(errno));
  if (S_ISDIR(st.st_mode))
    throw ConfigError(p +
                      ": cannot read the config: it is a directory (give the path of config.json)");
  if (!S_ISREG(st.st_mode))
    throw ConfigError(
        p +
        ": cannot read the config: not a regular file (a device, FIFO or socket); give the "
        "path of a config.json file");
  if ((unsigned long long)st.st_size > kMaxConfigBytes)
    throw ConfigError(p + ": the config is " + std::to_string((long long)st.st_size) +
                      " bytes; at most " + std::to_string(kMaxConfigBytes) + " bytes are read");
  std::string text;
  text.reserve((size_t)st.st_size);
  char buf[65536];
  for (;;) {
    ssize_t r = ::read(fd, buf, sizeof buf);
    if (r < 0) {
      if (errno == EINTR) continue;
      throw ConfigError(p + ": cannot read the config: " + std::strerror(errno));
    }
    if (r == 0) break;
    if (text.size() + (size_t)r > kMaxConfigBytes)  // the file grew while being read
      throw ConfigError(p + ": the config is larger than " + std::to_string(kMaxConfigBytes) +
                        " bytes; at most that many are read");
    text.append(buf, (size_t)r);
  }
  return text;
}

}  // namespace fkv::config_detail
