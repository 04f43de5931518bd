#include "fkv/driver.hpp"
