# The accelerated install as a server's operator does it: `cmake --install <build> --component
# accel` installs the native plugin and nothing else, and a core installed beside it finds it
# at run time from the installed layout alone (no build tree, no plugin path), listing its CUDA
# device as available or, on a machine without a usable GPU, as unavailable with the reason.
# Run with -DBUILD=<build dir> -DWORK=<scratch dir>.
file(REMOVE_RECURSE "${WORK}")

execute_process(COMMAND ${CMAKE_COMMAND} --install "${BUILD}" --component accel --prefix "${WORK}/accel-only"
                OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE status)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "cmake --install --component accel failed (status ${status}):\n${out}\n${err}")
endif()
file(GLOB_RECURSE installed LIST_DIRECTORIES false RELATIVE "${WORK}/accel-only" "${WORK}/accel-only/*")
if(NOT installed MATCHES "^lib[^;]*/deltakern/plugins/libdeltakern_native\\.so$")
  message(FATAL_ERROR "the accel component must install the native plugin alone; it installed: ${installed}")
endif()

# The default components, then accel into the same prefix, as a package manager would.
foreach(step IN ITEMS "" "--component;accel")
  execute_process(COMMAND ${CMAKE_COMMAND} --install "${BUILD}" ${step} --prefix "${WORK}/full"
                  OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE status)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "cmake --install ${step} failed (status ${status}):\n${out}\n${err}")
  endif()
endforeach()
# The prefix as a regular expression (a build directory may hold '+' or '.').
string(REGEX REPLACE "([][+.*()^$?|\\])" "\\\\\\1" work_re "${WORK}")
# Nothing from the build tree or the caller's environment may point the core at plugins.
execute_process(
  COMMAND ${CMAKE_COMMAND} -E env --unset=DELTAKERN_PLUGIN_PATH --unset=DELTAKERN_CONFIG --unset=DELTAKERN_BACKEND
          --unset=LD_LIBRARY_PATH DELTAKERN_PROBE_CACHE= "${WORK}/full/bin/deltakern" list
  OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE status)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "the installed deltakern list failed (status ${status}):\n${out}\n${err}")
endif()
string(REGEX MATCH "search path:\n  ([^\n]*)" _ "${out}")
if(NOT CMAKE_MATCH_1 MATCHES "^${work_re}/full/")
  message(FATAL_ERROR "the installed core must search its own plugin directory first:\n${out}")
endif()
foreach(expected IN ITEMS
    "loaded +native [^\n]*\n  path: ${work_re}/full/[^\n]*/libdeltakern_native\\.so"
    "loaded +native .*device cuda: (available|unavailable: [^\n]+)"
    "loaded +portable [^\n]*\n  path: ${work_re}/full/")
  if(NOT out MATCHES "${expected}")
    message(FATAL_ERROR "expected /${expected}/ in the installed deltakern list's output:\n${out}\n${err}")
  endif()
endforeach()
