#include "fkv/validate.hpp"
