// moe-route: route router outputs stored as .npy files from the command line.

#include <string>
#include <vector>

#include "command_line.hpp"

int main(int argc, char** argv) { return moe_route::run(std::vector<std::string>(argv + 1, argv + argc)); }
