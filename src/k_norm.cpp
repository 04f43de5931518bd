// k_norm: the table of K-norm kinds (include/fkv/k_norm.hpp).
#include "fkv/k_norm.hpp"

#include <array>

#include "fkv/errors.hpp"

namespace fkv {

namespace {

constexpr std::array<KNormInfo, 3> kRows{{
    // kind, name, kernel, weight_offset, weighted, key, suffix
    {KNormKind::None, "none", KNormKind::None, 0.0f, false, "0", ""},
    {KNormKind::Rms, "rms", KNormKind::Rms, 0.0f, true, "1", "_kn"},
    {KNormKind::RmsOnePlus, "rms_one_plus", KNormKind::Rms, 1.0f, true, nullptr, nullptr},
}};

// The table is in enum order, so that a kind's row is its number.
constexpr bool in_enum_order() {
  for (std::size_t i = 0; i < kRows.size(); ++i)
    if (static_cast<std::size_t>(kRows[i].kind) != i) return false;
  return true;
}
static_assert(in_enum_order(), "k_norm.cpp: the rows must follow KNormKind's numbers");

}  // namespace

std::span<const KNormInfo> k_norm_kinds() { return kRows; }

const KNormInfo& k_norm_info(KNormKind k) {
  const auto i = static_cast<std::size_t>(k);
  if (i >= kRows.size())
    throw ArgumentError("unknown K norm kind " + std::to_string(static_cast<int>(k)) +
                        ": the kinds are " + k_norm_names());
  return kRows[i];
}

std::string to_string(KNormKind k) {
  const auto i = static_cast<std::size_t>(k);
  return i < kRows.size() ? kRows[i].name : "?";
}

std::optional<KNormKind> find_k_norm(std::string_view name) {
  for (const KNormInfo& r : kRows)
    if (name == r.name) return r.kind;
  return std::nullopt;
}

KNormKind parse_k_norm(std::string_view name) {
  if (const auto k = find_k_norm(name)) return *k;
  throw ArgumentError("unknown K norm \"" + std::string(name) + "\"; expected " + k_norm_names());
}

KNormKind k_norm_from_int(long long v) {
  if (v < 0 || v >= static_cast<long long>(kRows.size()))
    throw ArgumentError("unknown K norm kind " + std::to_string(v) + ": the kinds are " +
                        k_norm_names());
  return kRows[static_cast<std::size_t>(v)].kind;
}

std::string k_norm_key(KNormKind k) {
  const KNormInfo& r = k_norm_info(k);
  return r.key ? r.key : std::string("?") + r.name;
}

std::string k_norm_suffix(KNormKind k) {
  const KNormInfo& r = k_norm_info(k);
  return r.suffix ? r.suffix : std::string("_?") + r.name;
}

std::string k_norm_names() {
  std::string out;
  for (std::size_t i = 0; i < kRows.size(); ++i) {
    if (i > 0) out += i + 1 == kRows.size() ? " or " : ", ";
    out += std::string("\"") + kRows[i].name + "\"";
  }
  return out;
}

}  // namespace fkv
