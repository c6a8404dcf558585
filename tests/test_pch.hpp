// The headers most test programs include, compiled once into a precompiled header that every
// test program reuses (tests/CMakeLists.txt): parsing Boost.Test and the public headers cost
// each program about 2.5 CPU-s. Only headers whose meaning cannot depend on the including file;
// each test still includes what it uses.
#pragma once

#include <deltakern/op_schemas.h>
#include <fmt/core.h>
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>
#include <deltakern/conformance.hpp>
#include <deltakern/deltakern.hpp>
#include <deltakern/plugin_sdk.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "host_tensors.hpp"
#include "test_support.hpp"
