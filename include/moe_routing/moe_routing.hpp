#pragma once
/// \file
/// Umbrella header of the generic core: views, stages, pipelines, presets, the policy
/// parser and the routing plan. Backends are included separately
/// (`<moe_routing/cpu.hpp>`), so a CPU-only user never sees a CUDA header.

#include "moe_routing/core/batch.hpp"
#include "moe_routing/core/error.hpp"
#include "moe_routing/core/expert_set.hpp"
#include "moe_routing/core/half.hpp"
#include "moe_routing/core/score_view.hpp"
#include "moe_routing/core/selected_set.hpp"
#include "moe_routing/core/stage_context.hpp"
#include "moe_routing/core/status.hpp"
#include "moe_routing/io/npy.hpp"
#include "moe_routing/metrics/plan_metrics.hpp"
#include "moe_routing/plan/routing_plan.hpp"
#include "moe_routing/policies/parse_policy.hpp"
#include "moe_routing/policies/pipeline.hpp"
#include "moe_routing/policies/policy_checks.hpp"
#include "moe_routing/policies/presets.hpp"
#include "moe_routing/policies/runtime_policy.hpp"
#include "moe_routing/version.hpp"
