// Fuzz target: the configuration loader. The input is the text of a TOML file; load_config
// must return a Config or throw Error(config) naming the file, never crash. Accepted configs
// then go through the backend-name check discovery runs.
#include "config/config.hpp"

#include <deltakern/deltakern.hpp>

#include <unistd.h>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

namespace {

namespace fs = std::filesystem;

// The loader reads a file (the real entry point, read errors included), so each input is
// written to one file in a directory of this process's own, removed at exit.
class InputFile {
 public:
  InputFile()
      : dir_(fs::temp_directory_path() / ("deltakern-fuzz-config-" + std::to_string(::getpid()))),
        file_(dir_ / "deltakern.toml") {
    fs::create_directories(dir_);
  }
  ~InputFile() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;
  const fs::path& path() const { return file_; }

 private:
  fs::path dir_, file_;
};

const fs::path& input_file() {
  static const InputFile file;
  return file.path();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace deltakern;
  {
    std::ofstream out(input_file(), std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  RuntimeOptions options;
  options.read_environment = false;
  options.config_file = input_file();
  try {
    const detail::Config config = detail::load_config(options);
    detail::check_backend_names(config, {"standin"});
  } catch (const Error& e) {
    // Every rejection is a config error that names the file.
    if (e.code() != ErrorCode::config) std::abort();
    if (std::string_view(e.what()).find(input_file().string()) == std::string_view::npos) std::abort();
  }
  return 0;
}
