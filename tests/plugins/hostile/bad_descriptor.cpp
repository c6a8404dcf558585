// A descriptor with one defect, chosen by DK_DEFECT (tests/CMakeLists.txt builds one library
// per defect). An ABI 1.0 core read each of them as it came, and faulted or allocated without
// bound, in-process; each must now be rejected naming the field and the bound:
//   struct_size_huge     dk_plugin.struct_size is 2^40
//   n_ops_huge           n_ops is 2^60 (the table holds one)
//   n_dtypes_huge        the op's capabilities declare 2^60 dtypes (the array holds one)
//   unterminated_schema  the op's schema has no NUL before an unmapped page
//   op_name_unmapped     the second op's name points into an unmapped page
//   null_caps            the op has no capabilities
//   limit_unknown_dim    a limit on a dimension the op does not have (a newer ABI's?)
//   limit_empty_range    a limit whose max is below its min
//   n_limits_huge        2^60 limits (the array holds one)
//   op_too_small         an op struct_size that ends before run, its last ABI 1.0 field
#include "hostile_init.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cstring>

namespace {

using namespace deltakern::testplugins;

#define DK_NAME_OF(defect) "bad_descriptor_" #defect
#define DK_NAME(defect) DK_NAME_OF(defect)

enum class Defect {
  struct_size_huge,
  n_ops_huge,
  n_dtypes_huge,
  unterminated_schema,
  op_name_unmapped,
  null_caps,
  limit_unknown_dim,
  limit_empty_range,
  n_limits_huge,
  op_too_small
};
constexpr Defect kDefect = Defect::DK_DEFECT;

int32_t varlen_fresh(void* p, const dk_call* c, DLManagedTensor** r, char* e, size_t n) {
  return run_varlen(p, c, r, e, n, {.in_place = false});
}

// Two pages, the second PROT_NONE; the schema's text fills the end of the first, no NUL after
// it: reading on looks into the unmapped page. Made by a static initialiser, before the entry.
struct TwoPages {
  char* first = nullptr;
  char* second = nullptr;
  const char* unterminated = nullptr;
  TwoPages() {
    const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
    void* mapped = ::mmap(nullptr, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mapped == MAP_FAILED) return;
    first = static_cast<char*>(mapped);
    second = first + page;
    const size_t length = std::strlen(kVarlenFreshSchema);
    std::memcpy(second - length, kVarlenFreshSchema, length);
    unterminated = second - length;
    ::mprotect(second, page, PROT_NONE);
  }
};
const TwoPages pages;

struct Tables {
  dk_limit limit{};
  dk_caps caps{};
  dk_op ops[2]{};
  dk_plugin plugin{};
  Tables() {
    limit = {sizeof(dk_limit), "state_len", 1, 64};
    caps = {sizeof(dk_caps), 1, kCpu, 1, kF32Only, 2, 4, DK_LAYOUT_TIME_CONTIGUOUS, 1, &limit};
    // The second op is ignored as unknown when its name can be read.
    ops[0] = {sizeof(dk_op), DK_OP_CAUSAL_CONV1D_VARLEN, kVarlenFreshSchema, &caps, nullptr, varlen_fresh};
    ops[1] = {sizeof(dk_op), "a_later_op", kVarlenFreshSchema, &caps, nullptr, varlen_fresh};
    plugin = {sizeof(dk_plugin),
              DK_ABI_MAJOR,
              DK_ABI_MINOR,
              DK_NAME(DK_DEFECT),
              "test",
              init_keep_host,
              probe_cpu_only,
              shutdown_nothing,
              1,
              ops,
              nullptr};
    switch (kDefect) {
      case Defect::struct_size_huge:
        plugin.struct_size = size_t{1} << 40;
        break;
      case Defect::n_ops_huge:
        plugin.n_ops = size_t{1} << 60;
        break;
      case Defect::n_dtypes_huge:
        caps.n_dtypes = size_t{1} << 60;
        break;
      case Defect::unterminated_schema:
        ops[0].schema = pages.unterminated;
        break;
      case Defect::op_name_unmapped:
        plugin.n_ops = 2;
        ops[1].name = pages.second;
        break;
      case Defect::null_caps:
        ops[0].caps = nullptr;
        break;
      case Defect::limit_unknown_dim:
        limit.dim = "heads";
        break;
      case Defect::limit_empty_range:
        limit.min = 65;
        break;
      case Defect::n_limits_huge:
        caps.n_limits = size_t{1} << 60;
        break;
      case Defect::op_too_small:
        ops[0].struct_size = ops[1].struct_size = DK_OP_SIZE_1_0 - sizeof(void*);
        break;
    }
  }
};

}  // namespace

DK_TEST_PLUGIN_EXPORT const dk_plugin* deltakern_plugin_entry(uint16_t, uint16_t) {
  static const Tables tables;
  return &tables.plugin;
}
