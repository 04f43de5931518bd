#include "fkv/codegen.hpp"
