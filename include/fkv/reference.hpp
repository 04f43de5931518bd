// reference: float64 CPU reference of the fused KV kernel (placeholder header).
#pragma once
#include "fkv/spec.hpp"
