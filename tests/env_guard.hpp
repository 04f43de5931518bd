// Sets environment variables for one test and restores their previous values (or their absence)
// when it goes out of scope.
#pragma once

#include <stdlib.h>

#include <cstdlib>
#include <map>
#include <optional>
#include <string>

namespace fkv_test {

struct EnvGuard {
  std::map<std::string, std::optional<std::string>> saved;
  void set(const std::string& name, const std::optional<std::string>& value) {
    if (!saved.count(name)) {
      const char* v = std::getenv(name.c_str());
      saved[name] = v ? std::optional<std::string>(v) : std::nullopt;
    }
    if (value)
      ::setenv(name.c_str(), value->c_str(), 1);
    else
      ::unsetenv(name.c_str());
  }
  ~EnvGuard() {
    for (const auto& [name, value] : saved) {
      if (value)
        ::setenv(name.c_str(), value->c_str(), 1);
      else
        ::unsetenv(name.c_str());
    }
  }
};

}  // namespace fkv_test
