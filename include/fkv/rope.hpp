// rope: cos/sin caches from a layer group's RopeFrequencies (placeholder header; see issue 5).
#pragma once
#include "fkv/config.hpp"
