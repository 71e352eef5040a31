// Must not compile: nothing may follow the assignment stage.
#include <moe_routing/moe_routing.hpp>
int main() {
  auto policy = moe_routing::refine{.k = 8} | moe_routing::prune{.k0 = 2};
  (void)policy;
}
