// arch: the one rule for what fkv-jit builds for a device (see include/fkv/arch.hpp).
#include "fkv/arch.hpp"

#include <algorithm>

#include "fkv/errors.hpp"

namespace fkv {
namespace {

std::string list_of(const std::vector<Arch>& archs) {
  std::string out;
  for (const Arch& a : archs) out += (out.empty() ? "" : ", ") + a.name();
  return out;
}

std::string cc_name(int major, int minor) {
  return std::to_string(major) + "." + std::to_string(minor);
}

bool all_digits(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

[[noreturn]] void not_an_arch(const std::string& text, const std::string& why) {
  throw ArgumentError("'" + text + "' is not a GPU arch" + (why.empty() ? "" : " (" + why + ")") +
                      ": name the device as sm_<major><minor>, e.g. sm_80, sm_90, sm_100, sm_120 "
                      "(or 9.0)");
}

}  // namespace

std::string ArchTarget::name() const { return arch.name() + (ptx ? " (PTX)" : ""); }

ArchTarget arch_for_compute_capability(int major, int minor, const std::vector<Arch>& supported) {
  std::vector<Arch> archs;
  for (const Arch& a : supported)
    if (!a.arch_specific) archs.push_back(a);
  std::sort(archs.begin(), archs.end(),
            [](const Arch& a, const Arch& b) { return a.number() < b.number(); });

  const Arch* same_major = nullptr;
  for (const Arch& a : archs)
    if (a.major == major && a.minor <= minor) same_major = &a;  // ascending: keeps the newest
  if (same_major) return {*same_major, false};
  const int cc = major * 10 + minor;
  if (!archs.empty() && archs.back().number() < cc) return {archs.back(), true};
  throw CompileError("compute capability " + cc_name(major, minor) + " (sm_" + std::to_string(cc) +
                     ") is not supported: fkv-jit builds for "
                     "sm_80 or newer, and this NVRTC (" +
                     nvrtc_version() + ") supports " +
                     (archs.empty() ? std::string("none of those") : list_of(archs)));
}

ArchTarget arch_for_compute_capability(int major, int minor) {
  return arch_for_compute_capability(major, minor, supported_archs());
}

ArchRequest resolve_arch(const std::string& text, const std::vector<Arch>& supported) {
  if (text.rfind("compute_", 0) == 0)
    not_an_arch(text, "a virtual arch; precompile for the device, sm_" + text.substr(8) +
                          ", and the runtime's choice of CUBIN or PTX follows");
  std::string s = text.rfind("sm_", 0) == 0 ? text.substr(3) : text;
  std::string suffix;  // "a" (arch-specific) or "f" (family): mapped below
  if (!s.empty() && (s.back() == 'a' || s.back() == 'f')) {
    suffix = s.substr(s.size() - 1);
    s.pop_back();
  }
  ArchRequest r;
  if (const auto dot = s.find('.'); dot != std::string::npos) {
    const std::string maj = s.substr(0, dot), min = s.substr(dot + 1);
    if (!suffix.empty() || text.rfind("sm_", 0) == 0 || !all_digits(maj) || maj.size() > 2 ||
        maj[0] == '0' || !all_digits(min) || min.size() != 1)
      not_an_arch(text, "");
    r.major = std::stoi(maj);
    r.minor = std::stoi(min);
  } else {
    // Two or three digits, the last one the minor version: sm_80, sm_90, sm_100, sm_120.
    if (!all_digits(s) || s.size() < 2 || s.size() > 3 || s[0] == '0')
      not_an_arch(text, s.size() == 1 ? "one digit: major and minor version are both needed" : "");
    r.major = std::stoi(s.substr(0, s.size() - 1));
    r.minor = s.back() - '0';
  }
  r.target = arch_for_compute_capability(r.major, r.minor, supported);

  const std::string asked = "sm_" + std::to_string(r.major * 10 + r.minor) + suffix;
  const std::string device = "a device of compute capability " + cc_name(r.major, r.minor);
  if (!suffix.empty())
    r.note = asked + " is an " + (suffix == "a" ? "arch-specific" : "arch-family") +
             " target, which the runtime never loads: on " + device + " it loads " +
             r.target.name() + ", so that is what is built";
  else if (r.target.ptx)
    r.note = "this NVRTC cannot build " + asked + ": on " + device + " the runtime loads " +
             r.target.name() + " (the driver compiles it when loading), so that is what is built";
  else if (r.target.arch.number() != r.major * 10 + r.minor)
    r.note = "this NVRTC cannot build " + asked + ": on " + device + " the runtime loads " +
             r.target.name() + ", so that is what is built";
  return r;
}

ArchRequest resolve_arch(const std::string& text) { return resolve_arch(text, supported_archs()); }

}  // namespace fkv
