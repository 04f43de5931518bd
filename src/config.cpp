#include "fkv/config.hpp"
