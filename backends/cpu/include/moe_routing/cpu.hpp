#pragma once
/// \file
/// The CPU backend: `moe_routing::cpu::route` and `moe_routing::cpu::router`.

#include "moe_routing/cpu/kernel_report.hpp"
#include "moe_routing/cpu/route.hpp"
#include "moe_routing/cpu/router.hpp"
