#pragma once
/// \file
/// The library's version. The CMake package reports the same one
/// (`find_package(moe_routing 0.1)`, `moe_routing_VERSION`): the test
/// version.header_matches_project fails when this header and `project(VERSION)` in
/// CMakeLists.txt disagree. Semantic versioning, and what counts as a break before 1.0:
/// CHANGELOG.md.

#define MOE_ROUTING_VERSION_MAJOR 0
#define MOE_ROUTING_VERSION_MINOR 1
#define MOE_ROUTING_VERSION_PATCH 0

/// MAJOR * 10000 + MINOR * 100 + PATCH, for `#if MOE_ROUTING_VERSION >= 200` (0.2.0).
#define MOE_ROUTING_VERSION \
  (MOE_ROUTING_VERSION_MAJOR * 10000 + MOE_ROUTING_VERSION_MINOR * 100 + MOE_ROUTING_VERSION_PATCH)

#define MOE_ROUTING_VERSION_TEXT_(major, minor, patch) #major "." #minor "." #patch
#define MOE_ROUTING_VERSION_TEXT(major, minor, patch) MOE_ROUTING_VERSION_TEXT_(major, minor, patch)
/// "MAJOR.MINOR.PATCH", made from the three numbers above so that it cannot disagree with them.
#define MOE_ROUTING_VERSION_STRING \
  MOE_ROUTING_VERSION_TEXT(MOE_ROUTING_VERSION_MAJOR, MOE_ROUTING_VERSION_MINOR, MOE_ROUTING_VERSION_PATCH)
