#include "plain_data.hpp"

#include <nanobind/stl/string.h>
#include <deltakern/plugin_sdk.hpp>
#include <deltakern/scalar_type.hpp>

#include <string>

namespace nb = nanobind;

namespace deltakern::python {

std::string dtype_name(const DLDataType& dtype) {
  ScalarType t;
  if (scalar_type_of(dtype, &t)) return short_name(t);
  return plugin::dtype_name(dtype);  // a dtype outside the vocabulary: the one long spelling
}

DLDataType dtype_from_name(std::string_view name, std::string_view what) {
  struct Alias {
    std::string_view long_name;
    ScalarType type;
  };
  static constexpr Alias kAliases[] = {{"float32", ScalarType::f32},
                                       {"float16", ScalarType::f16},
                                       {"bfloat16", ScalarType::bf16},
                                       {"int32", ScalarType::i32},
                                       {"uint8", ScalarType::u8}};
  for (const Alias& a : kAliases)
    if (name == a.long_name || name == short_name(a.type)) return to_dl(a.type);
  throw Error(ErrorCode::invalid_argument,
              std::string(what) + ": unknown dtype '" + std::string(name) +
                  "' (float32, float16, bfloat16, int32, uint8 or f32, f16, bf16, i32, u8)");
}

namespace {

nb::dict op_to_python(const OpInfo& op) {
  nb::dict d;
  d["name"] = op.name;
  d["schema"] = op.schema;
  nb::list devices;
  for (const auto& dev : op.devices) {
    nb::dict e;
    e["device"] = plugin::device_type_name(dev.type);
    e["min_compute_capability"] = dev.min_compute_capability;
    e["derives_max_seq_len"] = dev.derives_max_seq_len;
    e["graph_capturable"] = dev.graph_capturable;
    devices.append(e);
  }
  d["devices"] = devices;
  nb::list dtypes;
  for (const auto& t : op.dtypes) dtypes.append(dtype_name(t));
  d["dtypes"] = dtypes;
  d["widths"] = nb::make_tuple(op.min_width, op.max_width);
  nb::list layouts;
  for (Layout l : op.layouts) layouts.append(to_string(l));
  d["layouts"] = layouts;
  nb::dict limits;
  for (const auto& l : op.limits) limits[l.dim.c_str()] = nb::make_tuple(l.min, l.max);
  d["limits"] = limits;
  nb::list mutated;
  for (const auto& m : op.mutated) mutated.append(m);
  d["mutated"] = mutated;
  d["contract"] = to_string(op.contract());  // "in_place", "fresh" or "out"
  return d;
}

}  // namespace

nb::dict to_python(const PluginInfo& plugin) {
  nb::dict d;
  d["name"] = plugin.name;
  d["version"] = plugin.version;
  d["path"] = plugin.path.string();
  d["abi"] = std::to_string(plugin.abi_major) + "." + std::to_string(plugin.abi_minor);
  d["state"] = plugin.state == PluginInfo::State::loaded ? "loaded" : "rejected";
  d["reason"] = plugin.reason;
  nb::list devices;
  for (const auto& dev : plugin.devices) {
    nb::dict e;
    e["device"] = plugin::device_type_name(dev.type);
    e["available"] = dev.available;
    e["reason"] = dev.reason;
    devices.append(e);
  }
  d["devices"] = devices;
  nb::list ops;
  for (const auto& op : plugin.ops) ops.append(op_to_python(op));
  d["ops"] = ops;
  const char* probe = plugin.probe == PluginInfo::Probe::child   ? "child"
                      : plugin.probe == PluginInfo::Probe::cache ? "cache"
                                                                 : "in_process";
  d["probe"] = probe;
  d["probe_note"] = plugin.probe_note;
  return d;
}

nb::dict to_python(const Decision& decision) {
  nb::dict d;
  d["backend"] = decision.backend ? nb::cast(*decision.backend) : nb::none();
  d["why"] = decision.why;
  nb::list passed;
  for (const auto& p : decision.passed_over) passed.append(nb::make_tuple(p.backend, p.reason));
  d["passed_over"] = passed;
  d["fallback_from"] =
      decision.fallback_from
          ? nb::object(nb::make_tuple(decision.fallback_from->backend, decision.fallback_from->reason))
          : nb::none();
  d["strict"] = decision.strict;
  nb::dict limits;
  for (const auto& l : decision.limits) limits[l.dim.c_str()] = nb::make_tuple(l.min, l.max);
  d["limits"] = limits;
  d["contract"] = decision.contract ? nb::cast(to_string(*decision.contract)) : nb::none();
  d["description"] = decision.describe();
  return d;
}

nb::list to_python(const std::vector<FallbackCount>& counts) {
  nb::list out;
  for (const auto& c : counts) {
    nb::dict d;
    d["op"] = c.op;
    d["backend"] = c.backend;
    d["first_choice"] = c.first_choice;
    d["reason"] = c.reason;
    d["count"] = c.count;
    out.append(d);
  }
  return out;
}

}  // namespace deltakern::python
