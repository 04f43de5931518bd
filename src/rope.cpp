#include "fkv/rope.hpp"
