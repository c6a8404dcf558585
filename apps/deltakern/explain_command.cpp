// `deltakern explain OP`: which backend would serve a call of this shape, and why each
// other one would not; whether that is a fallback from the first choice (counted per call
// in Runtime::fallback_counts()) and whether strict dispatch would refuse it.
#include "commands.hpp"
#include "dl_names.hpp"

#include <deltakern/op_schemas.h>
#include <deltakern/runtime.hpp>

#include <fmt/core.h>

#include <charconv>
#include <string>
#include <vector>

namespace deltakern::cli {

void add_explain_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("explain", "Which backend would serve a call, and why the others would not");
  struct Options {
    std::string op, device = "cpu", dtype = "bf16", weight_dtype, state_dtype, layout = "time_contiguous";
    int width = 4;
    bool no_max_seq_len = false;
    std::vector<std::string> dims;
  };
  static Options o;
  cmd->add_option("op", o.op, "causal_conv1d_varlen, causal_conv1d_update, or either's _out variant")
      ->required()
      ->check(CLI::IsMember({DK_OP_CAUSAL_CONV1D_VARLEN, DK_OP_CAUSAL_CONV1D_UPDATE,
                             DK_OP_CAUSAL_CONV1D_VARLEN_OUT, DK_OP_CAUSAL_CONV1D_UPDATE_OUT}));
  cmd->add_option("--device", o.device, "cpu or cuda[:N]")->capture_default_str();
  cmd->add_option("--dtype", o.dtype, "dtype of x: f32, f16, bf16")->capture_default_str();
  cmd->add_option("--weight-dtype", o.weight_dtype, "dtype of weight and bias (default: x's)");
  cmd->add_option("--state-dtype", o.state_dtype, "dtype of the conv states (default: x's)");
  cmd->add_option("--width", o.width, "convolution width W")->capture_default_str();
  cmd->add_option("--layout", o.layout, "layout of x")
      ->check(CLI::IsMember({"time_contiguous", "channel_last"}))
      ->capture_default_str();
  cmd->add_flag("--no-max-seq-len", o.no_max_seq_len, "the host does not pass max_seq_len");
  cmd->add_option(
      "--dim", o.dims,
      "a size of the call, checked against the backends' limits: NAME=VALUE (repeatable; varlen: "
      "dim, tokens, batch, state_len, lines; update: batch, dim, tokens_per_update, state_len, lines)");
  cmd->callback([] {
    CallSignature sig;
    sig.op = o.op;
    sig.device = parse_device(o.device);
    sig.dtype = parse_dtype(o.dtype);
    sig.weight_dtype = o.weight_dtype.empty() ? sig.dtype : parse_dtype(o.weight_dtype);
    sig.state_dtype = o.state_dtype.empty() ? sig.dtype : parse_dtype(o.state_dtype);
    sig.bias_dtype = sig.weight_dtype;
    sig.width = o.width;
    sig.layout = o.layout == "channel_last" ? Layout::channel_last : Layout::time_contiguous;
    sig.max_seq_len_given = !o.no_max_seq_len;
    for (const auto& dim : o.dims) {
      const auto eq = dim.find('=');
      int64_t value = 0;
      const char* end = dim.data() + dim.size();
      if (eq == std::string::npos || eq == 0 || std::from_chars(dim.data() + eq + 1, end, value).ptr != end ||
          eq + 1 == dim.size())
        throw Error(ErrorCode::invalid_argument, fmt::format("--dim: expected NAME=VALUE, got '{}'", dim));
      sig.dims.emplace_back(dim.substr(0, eq), value);
    }

    Runtime runtime;
    const Decision decision = runtime.explain(sig);
    fmt::print("{} on {}, x {}, weight {}, states {}, width {}, layout {}:\n", sig.op, o.device,
               dtype_name(sig.dtype), dtype_name(sig.weight_dtype), dtype_name(sig.state_dtype), sig.width,
               to_string(sig.layout));
    fmt::print("{}\n", decision.describe());
    fmt::print("strict dispatch: {}\n",
               runtime.strict() ? "on (a fallback is an error)" : "off (a fallback is counted)");
    if (!decision.backend)
      throw Error(ErrorCode::unsupported, decision.fallback_from ? "strict dispatch refuses the fallback"
                                                                 : "no backend can serve this call");
  });
}

}  // namespace deltakern::cli
