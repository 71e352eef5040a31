// Must not compile: nothing may follow the assignment stage.
// The deleted `refine | stage` operator (include/moe_routing/policies/pipeline.hpp), chosen for refine | prune:
// expected error: (use of deleted function [^ ]*void moe_routing::operator\|\(const Left&, const Right&\) \[with Left = (moe_routing::)?refine. Right = (moe_routing::)?prune\]|candidate function \[with Left = moe_routing::refine, Right = moe_routing::prune\] has been explicitly deleted)
#include <moe_routing/moe_routing.hpp>
int main() {
  auto policy = moe_routing::refine{.k = 8} | moe_routing::prune{.k0 = 2};
  (void)policy;
}
