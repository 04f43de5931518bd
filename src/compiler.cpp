#include "fkv/compiler.hpp"
