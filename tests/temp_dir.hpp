// A private temporary directory for one test, removed (permissions restored first, so a test
// that made parts of it read-only still cleans up) when it goes out of scope.
#pragma once

#include <stdlib.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <string>
#include <system_error>

namespace fkv_test {

struct TempDir {
  std::filesystem::path path;
  explicit TempDir(const std::string& prefix = "fkv-test") {
    std::string tmpl = "/tmp/" + prefix + "-XXXXXX";
    REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
    path = tmpl;
  }
  ~TempDir() {
    namespace fs = std::filesystem;
    std::error_code ec;
    fs::permissions(path, fs::perms::owner_all, ec);
    for (const auto& e : fs::recursive_directory_iterator(path, ec))
      if (e.is_directory(ec) && !e.is_symlink(ec))
        fs::permissions(e.path(), fs::perms::owner_all, ec);
    fs::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
};

}  // namespace fkv_test
