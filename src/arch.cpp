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
  // The syntax is parse_arch_name's (compiler.hpp), the one Arch::parse reads too.
  const ArchName name = parse_arch_name(text);
  const std::string suffix = name.suffix ? std::string(1, name.suffix) : "";
  ArchRequest r;
  r.major = name.major;
  r.minor = name.minor;
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
