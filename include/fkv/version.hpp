#pragma once
namespace fkv {
inline constexpr const char* kVersion = "0.1.0";
inline constexpr int kCacheSchemaVersion = 1;
}  // namespace fkv
