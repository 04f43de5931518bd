#include "fkv/runtime.hpp"
