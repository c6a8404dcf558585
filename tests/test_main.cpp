// The main() of every test program but test_conformance (which registers its cases at run
// time), compiled once instead of once per program. The master suite takes the program's name
// (test_probe reports as "probe"), as each program's own BOOST_TEST_MODULE did.
#include <boost/test/unit_test.hpp>

#include <filesystem>
#include <string>

namespace {

bool init_unit_test() {
  auto& master = boost::unit_test::framework::master_test_suite();
  if (master.argc > 0) {
    std::string name = std::filesystem::path(master.argv[0]).filename().string();
    if (name.starts_with("test_")) name.erase(0, 5);
    master.p_name.value = name;
  }
  return true;
}

}  // namespace

int main(int argc, char* argv[]) { return boost::unit_test::unit_test_main(&init_unit_test, argc, argv); }
