// codegen: template + spec -> specialized source and NVRTC name expression.
//
// The specialization is done by C++ template arguments, not by pasting strings into the
// kernel: the generated translation unit is the template file itself plus one explicit
// instantiation, and the name expression lets NVRTC tell us the lowered (mangled) name.
#include "fkv/codegen.hpp"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <system_error>

#include "fkv/errors.hpp"
#include "fkv/options.hpp"
#include "fkv/version.hpp"

namespace fkv::detail {
struct EmbeddedFile {
  const char* name;
  const char* data;
  std::size_t size;
};
extern const EmbeddedFile kEmbeddedFiles[];
extern const std::size_t kEmbeddedFileCount;
}  // namespace fkv::detail

namespace fkv {
namespace {

constexpr const char* kTemplate = "fused_kv.cu";
// Headers the template includes, by include name.
constexpr const char* kHeaders[] = {"fkv_types.cuh", "fkv/kernel_params.h"};

std::string hex128(const XXH128_hash_t& h) {
  char buf[33];
  std::snprintf(buf, sizeof buf, "%016llx%016llx", static_cast<unsigned long long>(h.high64),
                static_cast<unsigned long long>(h.low64));
  return buf;
}

bool is_embedded_header(const std::string& include_name) {
  for (std::size_t i = 0; i < detail::kEmbeddedFileCount; ++i) {
    const std::string embedded = detail::kEmbeddedFiles[i].name;
    if (embedded == include_name && std::filesystem::path(embedded).extension() != ".cu")
      return true;
  }
  return false;
}

// A template or header from FKV_TEMPLATE_DIR: nullopt when there is no such file (the embedded
// copy is used; check_template_dir first makes sure the directory itself is usable). Opened without
// blocking and read only if it is a regular file of at most kMaxTemplateBytes: a FIFO there used to
// hang every compile, /dev/zero to eat memory until the process died. Not cache_fs::read_file: that
// refuses a symlink, and kernel developers link their working copies into this directory.
std::optional<std::string> read_template_file(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  const int open_errno = errno;
  auto refuse = [&](const std::string& why) -> ConfigError {
    return ConfigError("FKV_TEMPLATE_DIR: cannot use " + path.string() + ": " + why);
  };
  if (fd < 0 && (open_errno == ENOENT || open_errno == ENOTDIR)) {
    // A link to a working copy that moved is no absent file: the developer meant to test it.
    if (struct stat st{}; open_errno == ENOENT && ::lstat(path.c_str(), &st) == 0)
      throw refuse("a symbolic link to a file that does not exist");
    return std::nullopt;
  }
  errno = open_errno;
  if (fd < 0) throw refuse(std::error_code(errno, std::generic_category()).message());
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0)
    throw refuse(std::error_code(errno, std::generic_category()).message());
  if (!S_ISREG(st.st_mode))
    throw refuse(
        "not a regular file (a template must be a plain file, not a FIFO, device or "
        "directory)");
  auto too_large = [&] {
    return refuse("larger than " + std::to_string(kMaxTemplateBytes >> 20) +
                  " MiB, the limit for a kernel template or header");
  };
  if (st.st_size > static_cast<off_t>(kMaxTemplateBytes)) throw too_large();
  std::string text;
  char buf[65536];
  for (;;) {  // to the end, in case the file grew since fstat
    const ssize_t got = ::read(fd, buf, sizeof buf);
    if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (got < 0) throw refuse(std::error_code(errno, std::generic_category()).message());
    if (got == 0) break;
    text.append(buf, static_cast<std::size_t>(got));
    if (text.size() > kMaxTemplateBytes) throw too_large();
  }
  return text;
}

// The names the embedded files have in a template directory ("fkv/kernel_params.h" ->
// "kernel_params.h"), for messages.
std::string embedded_file_names() {
  std::string out;
  for (std::size_t i = 0; i < detail::kEmbeddedFileCount; ++i)
    out +=
        (i ? ", " : "") + std::filesystem::path(detail::kEmbeddedFiles[i].name).filename().string();
  return out;
}

// A template directory in which a file was not found. Falling back to the embedded copy of that
// one file is intended (a directory may override only some templates), but a directory that
// does not exist, is no directory, or holds none of the files would test the embedded copies
// while the developer believes their own were compiled: a ConfigError naming the variable.
void check_template_dir(const std::filesystem::path& dir) {
  auto refuse = [&](const std::string& why) -> ConfigError {
    return ConfigError("FKV_TEMPLATE_DIR=" + dir.string() + ": " + why +
                       ". Set it to the directory that holds your copies of the kernel templates "
                       "(e.g. templates/ of the source tree), or unset it to use the embedded "
                       "ones");
  };
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0)
    throw refuse(errno == ENOENT ? std::string("the directory does not exist")
                                 : "cannot use it: " +
                                       std::error_code(errno, std::generic_category()).message());
  if (!S_ISDIR(st.st_mode)) throw refuse("it is not a directory");
  for (std::size_t i = 0; i < detail::kEmbeddedFileCount; ++i) {
    const auto file = dir / std::filesystem::path(detail::kEmbeddedFiles[i].name).filename();
    if (::lstat(file.c_str(), &st) == 0) return;
  }
  throw refuse("the directory holds none of the kernel templates or headers (" +
               embedded_file_names() + ")");
}

// Says once per process and file (info) where each template came from, so a developer can check
// that their copy was the one compiled.
void log_template_origin(const std::string& name, const std::filesystem::path& dir, bool from_dir) {
  static std::mutex mutex;
  static std::set<std::string>& seen = *new std::set<std::string>;  // never destroyed
  const std::string path = (dir / std::filesystem::path(name).filename()).string();
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (!seen.insert(path).second) return;
  }
  if (from_dir)
    spdlog::info("fkv-jit codegen: FKV_TEMPLATE_DIR: {} is read from {}", name, path);
  else
    spdlog::info("fkv-jit codegen: FKV_TEMPLATE_DIR: no {} in {}; the embedded copy is used",
                 std::filesystem::path(name).filename().string(), dir.string());
}

}  // namespace

std::string device_type(DType d) {
  switch (d) {
    case DType::BF16:
      return "fkv_kernels::bf16";
    case DType::FP16:
      return "fkv_kernels::fp16";
    case DType::FP32:
      return "float";
    case DType::FP8_E4M3:
      return "fkv_kernels::fp8_e4m3";
    case DType::FP8_E5M2:
      return "fkv_kernels::fp8_e5m2";
  }
  return "?";
}

std::string device_type(IndexType t) { return t == IndexType::I32 ? "int" : "long long"; }

namespace {

[[noreturn]] void refuse_include(const std::string& file, int line, const std::string& what) {
  throw CompileError(
      file + ":" + std::to_string(line) + ": " + what +
      ". NVRTC would read that from disk, outside the cache key: FKV_TEMPLATE_DIR templates may "
      "#include only the embedded headers (fkv_types.cuh, fkv/kernel_params.h, decode_params.h), "
      "each as a plain #include \"name\" line; paste anything else into the template");
}

bool ident_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '$' || static_cast<unsigned char>(c) >= 0x80;
}

// The text after translation phase 2 (every backslash-newline removed), with the original line
// number of each character, for messages.
struct Spliced {
  std::string text;
  std::vector<int> line;
};

Spliced splice_lines(const std::string& file, const std::string& raw) {
  Spliced out;
  out.text.reserve(raw.size());
  out.line.reserve(raw.size());
  int line = 1;
  for (std::size_t i = 0; i < raw.size(); ++i) {
    const char c = raw[i];
    if (c == '\r' && (i + 1 == raw.size() || raw[i + 1] != '\n'))
      refuse_include(file, line, "a carriage return that does not end a line");
    if (c == '\\') {
      std::size_t j = i + 1;
      while (j < raw.size() &&
             (raw[j] == ' ' || raw[j] == '\t' || raw[j] == '\f' || raw[j] == '\v'))
        ++j;
      if (j < raw.size() && raw[j] == '\r') ++j;
      if (j < raw.size() && raw[j] == '\n') {
        // Compilers disagree on whether spaces between the backslash and the newline splice.
        if (raw[i + 1] != '\n' && raw[i + 1] != '\r')
          refuse_include(file, line, "a backslash followed by spaces at the end of a line");
        i = j;
        ++line;
        continue;
      }
    }
    out.text += c;
    out.line.push_back(line);
    if (c == '\n') ++line;
  }
  out.line.push_back(line);  // for the end of the text
  return out;
}

}  // namespace

void check_template_includes(const std::string& file, const std::string& raw) {
  // The compiler's view of the text, translation phases 1 to 3 (line splices, comments, string
  // and character literals, digraphs), so that no spelling of a directive escapes the check:
  // "#inc\<newline>lude", "#/**/include", "%:include", "/* */ #include". Where compilers could
  // disagree (spaces after a line-ending backslash, a lone carriage return, raw string literals,
  // whose splices are undone) the template is refused rather than guessed at.
  const Spliced sp = splice_lines(file, raw);
  const std::string& s = sp.text;
  const std::size_t n = s.size();
  std::size_t i = 0;
  bool line_start = true;  // only whitespace and comments so far on this line
  auto line_of = [&](std::size_t at) { return sp.line[std::min(at, n)]; };
  // Skips a comment at i, if there is one; true when it did. Sets `newline` if it spanned lines.
  auto skip_comment = [&](bool& newline) {
    if (i + 1 >= n || s[i] != '/') return false;
    if (s[i + 1] == '/') {
      while (i < n && s[i] != '\n') ++i;
      return true;
    }
    if (s[i + 1] == '*') {
      const std::size_t close = s.find("*/", i + 2);
      const std::size_t stop = close == std::string::npos ? n : close + 2;
      if (s.find('\n', i) < stop) newline = true;
      i = stop;
      return true;
    }
    return false;
  };
  auto skip_literal = [&](char quote) {  // at the opening quote; stops after it or at a newline
    for (++i; i < n && s[i] != '\n'; ++i) {
      if (s[i] == '\\' && i + 1 < n && s[i + 1] != '\n') {
        ++i;
      } else if (s[i] == quote) {
        ++i;
        return;
      }
    }
  };
  auto read_identifier = [&] {
    const std::size_t b = i;
    while (i < n && ident_char(s[i])) ++i;
    return s.substr(b, i - b);
  };
  auto skip_blanks = [&] {  // horizontal whitespace and comments within the directive's line
    for (;;) {
      bool newline = false;
      if (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\f' || s[i] == '\v')) {
        ++i;
      } else if (!skip_comment(newline)) {
        return;
      }
    }
  };
  // The directive whose name starts at i ("#" already read).
  auto directive = [&] {
    const std::size_t at = i;
    skip_blanks();
    const std::string name = read_identifier();
    if (name == "pragma") {
      const std::size_t eol = std::min(s.find('\n', i), n);
      if (s.substr(i, eol - i).find("include") != std::string::npos)
        refuse_include(file, line_of(at), "a #pragma naming an include");
      return;
    }
    if (name != "include" && name != "include_next" && name != "import" && name != "embed") return;
    if (name != "include") refuse_include(file, line_of(at), "#" + name + " is not allowed");
    skip_blanks();
    std::string target;
    if (i < n && (s[i] == '"' || s[i] == '<')) {
      const char close = s[i] == '"' ? '"' : '>';
      const std::size_t end = s.find_first_of(std::string(1, close) + "\n", i + 1);
      if (end != std::string::npos && s[end] == close) {
        target = s.substr(i + 1, end - i - 1);
        i = end + 1;
        skip_blanks();
        if (i < n && s[i] != '\n') target.clear();  // more tokens after the header name
      }
    }
    if (target.empty()) {
      const std::size_t eol = std::min(s.find('\n', at), n);
      refuse_include(file, line_of(at),
                     "#include" + s.substr(i, eol - i) +
                         " is not a plain #include \"name\" of an embedded header");
    }
    if (!is_embedded_header(target))
      refuse_include(file, line_of(at),
                     "#include '" + target +
                         "' is not one of the kernel headers fkv-jit hands NVRTC in memory");
  };

  while (i < n) {
    const char c = s[i];
    bool newline = false;
    if (c == '\n') {
      line_start = true;
      ++i;
    } else if (c == ' ' || c == '\t' || c == '\f' || c == '\v' || c == '\r') {
      ++i;
    } else if (s.compare(i, 3, "\xEF\xBB\xBF") == 0) {
      i += 3;  // a UTF-8 byte-order mark: NVRTC 13 does not skip one, but a compiler may
    } else if (skip_comment(newline)) {
      line_start = line_start || newline;
    } else if (line_start && (c == '#' || (c == '%' && i + 1 < n && s[i + 1] == ':'))) {
      i += c == '#' ? 1 : 2;
      line_start = false;
      directive();
    } else if (c == '"' || c == '\'') {
      line_start = false;
      skip_literal(c);
    } else if ((c >= '0' && c <= '9') ||
               (c == '.' && i + 1 < n && s[i + 1] >= '0' && s[i + 1] <= '9')) {
      // A pp-number, digit separators included (1'000 is one token, not a character literal).
      line_start = false;
      for (++i; i < n; ++i) {
        if ((s[i] == '+' || s[i] == '-') &&
            (s[i - 1] == 'e' || s[i - 1] == 'E' || s[i - 1] == 'p' || s[i - 1] == 'P'))
          continue;
        if (s[i] == '\'' && i + 1 < n && ident_char(s[i + 1])) continue;
        if (!ident_char(s[i]) && s[i] != '.') break;
      }
    } else if (ident_char(c)) {
      const bool first = line_start;
      line_start = false;
      const std::size_t at = i;
      const std::string word = read_identifier();
      if (i < n && s[i] == '"' && word.back() == 'R')
        refuse_include(file, line_of(at), "a raw string literal (its line splices are undone)");
      if (word.rfind("__has_include", 0) == 0 || word.rfind("__has_embed", 0) == 0)
        refuse_include(file, line_of(at), word + " looks for a file on disk");
      if (first && word == "import") refuse_include(file, line_of(at), "an import is not allowed");
    } else {
      line_start = false;
      ++i;
    }
  }
}

std::string template_text(const std::string& name) {
  return template_text(name, JitOptions::global());
}

std::string template_text(const std::string& name, const JitOptions& options) {
  if (!options.template_dir.empty()) {
    // Kernel development: read the file from disk ("fkv/kernel_params.h" -> kernel_params.h).
    const auto path = options.template_dir / std::filesystem::path(name).filename();
    if (std::optional<std::string> text = read_template_file(path)) {
      check_template_includes(path.string(), *text);
      log_template_origin(name, options.template_dir, true);
      return *text;
    }
    check_template_dir(options.template_dir);
    log_template_origin(name, options.template_dir, false);
  }
  for (std::size_t i = 0; i < detail::kEmbeddedFileCount; ++i)
    if (name == detail::kEmbeddedFiles[i].name)
      return std::string(detail::kEmbeddedFiles[i].data, detail::kEmbeddedFiles[i].size);
  throw CompileError("no kernel template named '" + name + "' is embedded in this build");
}

std::string read_template(KernelSource& out, const std::string& template_name,
                          std::span<const char* const> headers, const JitOptions& options) {
  const std::string body = template_text(template_name, options);
  XXH3_state_t* st = XXH3_createState();
  XXH3_128bits_reset(st);
  auto add = [&](const std::string& name, const std::string& text) {
    const std::uint64_t n = name.size(), m = text.size();
    XXH3_128bits_update(st, &n, sizeof n);
    XXH3_128bits_update(st, name.data(), n);
    XXH3_128bits_update(st, &m, sizeof m);
    XXH3_128bits_update(st, text.data(), m);
  };
  add(template_name, body);
  out.template_name = template_name;
  out.headers.clear();
  for (const char* h : headers) {
    out.headers.emplace_back(h, template_text(h, options));
    add(h, out.headers.back().second);
  }
  out.template_hash = hex128(XXH3_128bits_digest(st));
  XXH3_freeState(st);
  return body;
}

void assemble_source(KernelSource& out, const std::string& template_name,
                     std::span<const char* const> headers, const JitOptions& options,
                     const std::string& note, const std::string& instantiation) {
  const std::string body = read_template(out, template_name, headers, options);
  std::ostringstream src;
  src << "// fkv spec: " << out.specialization << "\n"
      << "// Generated by fkv-jit " << kVersion << " from templates/" << template_name << note
      << "\n"
      << "#line 1 \"" << template_name << "\"\n"
      << body << "\n"
      << instantiation;
  out.source = src.str();
}

KernelSource generate(const KernelSpec& spec) { return generate(spec, JitOptions::global()); }

KernelSource generate(const KernelSpec& spec, const JitOptions& options) {
  spec.check();
  const Tiling t = spec.tiling(options);  // FKV_BLOCK_WARPS from these options, like the templates
  KernelSource out;
  out.short_name = spec.short_name();
  out.specialization = spec.canonical();

  std::ostringstream expr;
  expr << "fkv_kernels::fused_kv_materialize<" << spec.num_kv_heads << ", " << spec.head_dim << ", "
       << spec.rotary_dim << ", " << (spec.neox ? "true" : "false") << ", "
       << static_cast<int>(spec.k_norm) << ", " << device_type(spec.act) << ", "
       << device_type(spec.cache) << ", " << device_type(spec.cos_sin) << ", "
       << device_type(spec.positions) << ", " << device_type(spec.slots) << ", "
       << (spec.mode == OutputMode::Pool ? "true" : "false") << ", "
       << (spec.paged ? "true" : "false") << ", " << (spec.kv_bias ? "true" : "false") << ", "
       << t.vec << ", " << t.loads << ", " << t.warps_per_block << ">";
  out.name_expression = expr.str();

  std::ostringstream note;
  note << " (tiling: " << t.loads << " x " << t.vec << " elements per lane, " << t.lanes_per_head
       << " lanes per head, " << t.heads_per_warp << " heads per warp, " << t.block_threads
       << " threads per block)";
  assemble_source(out, kTemplate, kHeaders, options, note.str(),
                  "template __global__ void " + out.name_expression + "(const FkvKernelParams);\n");
  return out;
}

}  // namespace fkv
