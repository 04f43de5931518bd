#include "fkv/cache.hpp"
