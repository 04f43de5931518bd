// arch: which GPU architecture fkv-jit builds a kernel for. One rule, used by the runtime
// (for the device it loads on) and by precompile (for the devices a cache is baked for), so
// that a precompiled entry is exactly the one the runtime looks up: the cache key and the
// entry's directory both name the arch.
#pragma once

#include <string>
#include <vector>

#include "fkv/compiler.hpp"

namespace fkv {

// What is built for a device: a CUBIN for `arch`, or (ptx) PTX for `arch` that the driver
// compiles for a device newer than this NVRTC when it loads the module.
struct ArchTarget {
  Arch arch;
  bool ptx = false;
  std::string name() const;  // "sm_90", "sm_120 (PTX)"
  bool operator==(const ArchTarget& o) const { return arch == o.arch && ptx == o.ptx; }
};

// The rule for a device of compute capability major.minor, given the real archs NVRTC can
// build (supported_archs()):
//   1. the device's own sm_XY when supported;
//   2. else the newest supported arch of the same major below it (a CUBIN runs on the later
//      minor versions of its major);
//   3. else, for a device newer than every supported arch, PTX of the newest one;
//   4. else (older than every supported arch: fkv-jit needs sm_80 or newer) CompileError
//      naming the compute capability and the supported archs.
// Never an arch-specific target (sm_90a, sm_100a): the kernels use no arch-specific
// instructions, and one name per device keeps precompiled caches and the runtime in step.
ArchTarget arch_for_compute_capability(int major, int minor, const std::vector<Arch>& supported);
// Whether a device with this target runs sm_90a kernels (TMA, warpgroup MMAs): a CUBIN for
// sm_90 (H100, H200). KernelSource::arch_specific kernels load only there.
inline bool runs_sm90a(const ArchTarget& t) {
  return !t.ptx && t.arch.major == 9 && t.arch.minor == 0;
}
// The same with supported_archs() of the NVRTC in use (or of the toolkit fkv-jit was built
// with, when no NVRTC can be loaded).
ArchTarget arch_for_compute_capability(int major, int minor);

// An arch a user asked to precompile for, resolved by the rule above.
struct ArchRequest {
  int major = 0, minor = 0;  // the compute capability the text names
  ArchTarget target;         // what the runtime loads on such a device
  std::string note;          // why target differs from the text ("" when it does not)
};

// Reads the device a user names and returns what the runtime builds for it. The text is read by
// parse_arch_name (compiler.hpp), the syntax Arch::parse shares: "sm_90", "90", "9.0",
// "sm_120"; an arch-specific or family name ("sm_90a", "sm_100f") is mapped to the device's
// target with a note, since the runtime never loads those.
// Throws ArgumentError for text that is not a real arch: "compute_90" (a virtual arch: say
// sm_90), "sm_1", "sm_090", "sm_90x", "hopper"; CompileError when rule 4 refuses the device.
ArchRequest resolve_arch(const std::string& text, const std::vector<Arch>& supported);
ArchRequest resolve_arch(const std::string& text);  // with supported_archs()

}  // namespace fkv
