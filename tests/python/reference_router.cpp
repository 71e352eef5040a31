// The C++ side of the Python parity test: routes a .npy score matrix with
// `cpu::router` (the library's convenience layer, a code path the Python module does
// not take) and writes its ids and weights, for test_parity.py to compare with route().
// usage: reference_router SCORES.npy POLICY TOP_K SCORING IDS.npy WEIGHTS.npy

#include <cstdio>
#include <exception>
#include <string>

#include <moe_routing/cpu.hpp>
#include <moe_routing/moe_routing.hpp>

namespace mr = moe_routing;

namespace {

mr::scoring scoring_of(const std::string& word) {
  if (word == "sigmoid") return mr::scoring::sigmoid;
  if (word == "sqrtsoftplus") return mr::scoring::sqrtsoftplus;
  if (word == "probabilities") return mr::scoring::probabilities;
  return mr::scoring::softmax;
}

template <class Element>
int route_and_write(const mr::npy::array& scores, const char* const* argv) {
  const int n = static_cast<int>(scores.shape[0]), experts = static_cast<int>(scores.shape[1]);
  const int top_k = std::stoi(argv[3]);
  mr::routing_batch<Element> batch{mr::make_score_view(scores.data<Element>(), n, experts)};
  batch.mode = scoring_of(argv[4]);
  mr::cpu::router router(mr::parse_policy_or_throw(argv[2]), {n, experts, top_k});
  const mr::routing_plan& plan = router.route(batch);
  const std::vector<std::size_t> shape = {static_cast<std::size_t>(n), static_cast<std::size_t>(top_k)};
  mr::npy::write(argv[5], mr::npy::dtype::int32, shape, plan.ids().data());
  mr::npy::write(argv[6], mr::npy::dtype::float32, shape, plan.weights().data());
  std::printf("active %d selected %d\n", plan.summary().active_count, plan.summary().selected_count);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 7) {
    std::fprintf(stderr, "usage: reference_router SCORES.npy POLICY TOP_K SCORING IDS.npy WEIGHTS.npy\n");
    return 2;
  }
  try {
    const mr::npy::array scores = mr::npy::read(argv[1]);
    if (scores.type == mr::npy::dtype::float16) return route_and_write<mr::float16>(scores, argv);
    return route_and_write<float>(scores, argv);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "reference_router: %s\n", error.what());
    return 1;
  }
}
