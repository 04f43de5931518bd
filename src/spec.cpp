#include "fkv/spec.hpp"
