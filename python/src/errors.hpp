// deltakern::Error becomes the Python exception of its code (deltakern/_errors.py), the core's
// message unchanged.
#pragma once

namespace deltakern::python {

void register_error_translator();

}  // namespace deltakern::python
