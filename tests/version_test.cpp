// The version the header reports is the CMake project's (and so the installed package
// config's): MOE_ROUTING_PROJECT_VERSION is `${PROJECT_VERSION}` from tests/CMakeLists.txt.
#include <cstdio>
#include <string_view>

#include <moe_routing/version.hpp>

static_assert(MOE_ROUTING_VERSION ==
              MOE_ROUTING_VERSION_MAJOR * 10000 + MOE_ROUTING_VERSION_MINOR * 100 + MOE_ROUTING_VERSION_PATCH);

int main() {
  const std::string_view header = MOE_ROUTING_VERSION_STRING;
  const std::string_view project = MOE_ROUTING_PROJECT_VERSION;
  if (header != project) {
    std::printf("include/moe_routing/version.hpp says %s, project(VERSION) in CMakeLists.txt says %s\n",
                MOE_ROUTING_VERSION_STRING, MOE_ROUTING_PROJECT_VERSION);
    return 1;
  }
  std::printf("version %s\n", MOE_ROUTING_VERSION_STRING);
  return 0;
}
