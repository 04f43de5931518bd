#include "fkv/materialize.hpp"
