#pragma once
/// \file
/// How a backend runs a stage: `stage_executor<Backend, Stage>::apply(stage, context)`.
/// The primary template is declared and never defined; each backend specializes it
/// for the built-in stages on its own tag type, in its own folder. A backend may also
/// accept user stages through a generic specialization (the CPU backend calls a
/// stage's own `apply(context)`).

namespace moe_routing {

template <class Backend, class Stage>
struct stage_executor;

}  // namespace moe_routing
