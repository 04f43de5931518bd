#include "fkv/reference.hpp"
