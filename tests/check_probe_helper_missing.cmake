# A core whose probe helper is missing (a library copied away from its install) warns once
# and loads plugins in this process as before, rather than refusing every plugin: the
# helper's absence is the installation's fault, not the plugins'.
# Run with -DBUILD_LIB=<build>/lib -DCLI=<deltakern> -DWORK=<scratch dir>.
file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}/lib")
file(GLOB core_files "${BUILD_LIB}/libdeltakern.so*")
file(COPY ${core_files} DESTINATION "${WORK}/lib")
if(EXISTS "${WORK}/lib/deltakern/deltakern-probe")
  message(FATAL_ERROR "the copied core must have no helper beside it")
endif()
# LD_LIBRARY_PATH wins over the CLI's RUNPATH: it runs with the copy, whose helper is missing.
execute_process(
  COMMAND ${CMAKE_COMMAND} -E env "LD_LIBRARY_PATH=${WORK}/lib" DELTAKERN_LOG_LEVEL=warn "${CLI}" list
  OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE status)
foreach(expected IN ITEMS
    "loaded +portable"
    "probe: none: loaded straight into this process \\(probe helper [^\n]*/deltakern-probe is not executable")
  if(NOT out MATCHES "${expected}")
    message(FATAL_ERROR "expected /${expected}/ in deltakern list's output (status ${status}):\n${out}\n${err}")
  endif()
endforeach()
if(NOT err MATCHES "unprotected from crashes")
  message(FATAL_ERROR "expected a warning that plugins load unprotected:\n${err}")
endif()
if(NOT status EQUAL 0)
  message(FATAL_ERROR "deltakern list failed (status ${status}):\n${out}\n${err}")
endif()
