// config: JSON access with limits. A config is read only from a regular file of at most
// kMaxConfigBytes, parsed with nesting at most kMaxJsonDepth deep, so that hostile input (a
// device file, a huge file, "[[[[..." thousands deep) gets a ConfigError instead of unbounded
// memory or a stack overflow in the recursive walks later (dump(), canonical()).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>
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

// Python's json module writes non-finite floats as the bare literals NaN, Infinity and
// -Infinity (Mamba-2 / Bamba / Falcon-H1 "time_step_limit": [0.0, Infinity]); strict JSON has no
// such tokens. Outside strings, each is replaced by a marker string, which restore_non_finite()
// turns back into a double after parsing. `shifts` records (offset in the rewritten text, bytes
// added so far) so that a parse error still reports the byte offset of the original text.
constexpr std::string_view kMarker = "\\u0001fkv-non-finite:";
constexpr std::string_view kMarkerValue =
    "\x01"
    "fkv-non-finite:";  // \x01f would be one char

struct Rewritten {
  std::string text;
  std::vector<std::pair<size_t, long>> shifts;
};

std::optional<Rewritten> rewrite_python_literals(std::string_view in) {
  static constexpr std::string_view literals[] = {"-Infinity", "Infinity", "NaN"};
  auto delimiter = [&](size_t i) {
    return i >= in.size() || std::string_view(" \t\r\n,]}:").find(in[i]) != std::string_view::npos;
  };
  std::optional<Rewritten> out;
  size_t copied = 0;
  long added = 0;
  bool in_string = false;
  for (size_t i = 0; i < in.size(); ++i) {
    const char c = in[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
      continue;
    }
    if (c != 'N' && c != 'I' && c != '-') continue;
    // A literal starts a value: the previous non-blank byte is one of [ , : (or none).
    size_t j = i;
    while (j > 0 && std::string_view(" \t\r\n").find(in[j - 1]) != std::string_view::npos) --j;
    if (j > 0 && std::string_view("[,:").find(in[j - 1]) == std::string_view::npos) continue;
    for (std::string_view lit : literals) {
      if (in.substr(i, lit.size()) != lit || !delimiter(i + lit.size())) continue;
      if (!out) out.emplace();
      const std::string repl = "\"" + std::string(kMarker) + std::string(lit) + "\"";
      out->text.append(in.substr(copied, i - copied));
      out->text += repl;
      added += (long)repl.size() - (long)lit.size();
      out->shifts.push_back({out->text.size(), added});
      copied = i + lit.size();
      i = copied - 1;
      break;
    }
  }
  if (out) out->text.append(in.substr(copied));
  return out;
}

size_t original_offset(const Rewritten& r, size_t byte) {
  long shift = 0;
  for (const auto& [at, added] : r.shifts)
    if (at <= byte) shift = added;
  return (size_t)std::max<long>(1, (long)byte - shift);
}

std::optional<double> non_finite_of(const json& v) {
  auto from_text = [](std::string_view s) -> std::optional<double> {
    if (s == "Infinity" || s == "inf") return std::numeric_limits<double>::infinity();
    if (s == "-Infinity" || s == "-inf") return -std::numeric_limits<double>::infinity();
    if (s == "NaN" || s == "nan") return std::numeric_limits<double>::quiet_NaN();
    return std::nullopt;
  };
  if (v.is_string()) {
    const auto& s = v.get_ref<const std::string&>();
    if (s.rfind(kMarkerValue, 0) == 0)
      return from_text(std::string_view(s).substr(kMarkerValue.size()));
    return std::nullopt;
  }
  // transformers 5 serializes non-finite floats as {"__float__": "Infinity"}.
  if (v.is_object() && v.size() == 1 && v.contains("__float__") && v["__float__"].is_string())
    return from_text(v["__float__"].get<std::string>());
  return std::nullopt;
}

}  // namespace

void restore_non_finite(json& root) {
  std::vector<json*> todo = {&root};
  while (!todo.empty()) {
    json* v = todo.back();
    todo.pop_back();
    if (auto d = non_finite_of(*v)) {
      *v = *d;
      continue;
    }
    if (v->is_structured())
      for (json& child : *v) todo.push_back(&child);
  }
}

bool has_non_finite_spelling(const json& root) {
  std::vector<const json*> todo = {&root};
  while (!todo.empty()) {
    const json* v = todo.back();
    todo.pop_back();
    if (non_finite_of(*v)) return true;
    if (v->is_structured())
      for (const json& child : *v) todo.push_back(&child);
  }
  return false;
}

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
  const std::optional<Rewritten> rewritten = rewrite_python_literals(text);
  const std::string_view parsed = rewritten ? std::string_view(rewritten->text) : text;
  try {
    json root = json::parse(parsed.begin(), parsed.end(), limit);
    restore_non_finite(root);
    return root;
  } catch (const TooDeep&) {
    throw ConfigError(depth_message(name));
  } catch (const json::parse_error& e) {
    const size_t byte = rewritten ? original_offset(*rewritten, e.byte) : e.byte;
    auto [line, col] = line_col(text, byte);
    std::string what = e.what();
    // nlohmann's text starts with "[json.exception.parse_error.101] parse error at line L, column
    // C: ".
    auto colon = what.find(": ");
    std::string detail = colon != std::string::npos ? what.substr(colon + 2) : what;
    throw ConfigError(name + ": malformed JSON at byte " + std::to_string(byte) + " (line " +
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
