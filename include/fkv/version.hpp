#pragma once
#include "fkv/build_version.h"  // generated from CMakeLists.txt's project(VERSION)
namespace fkv {
inline constexpr const char* kVersion = FKV_VERSION_STRING;
inline constexpr int kCacheSchemaVersion = 1;
}  // namespace fkv
