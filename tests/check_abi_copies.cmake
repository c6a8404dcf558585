# tests/abi/v1_2's plugin_abi.h is the current header with one field appended to every struct:
# with those lines, its TEST COPY preamble and its minor taken out it must equal the real one,
# so that a change to the ABI cannot leave the future-minor test plugin testing an older one.
file(READ "${SOURCE}/core/include/deltakern/plugin_abi.h" current)
file(READ "${SOURCE}/tests/abi/v1_2/deltakern/plugin_abi.h" copy)
string(REGEX REPLACE "^/\\* TEST COPY:[^\n]*\n[^\n]*\n \\*\n \\* " "/* " copy "${copy}")
string(REGEX REPLACE "\n[^\n]*added_in_1_2[^\n]*" "" copy "${copy}")
string(REPLACE "#define DK_ABI_MINOR 2" "#define DK_ABI_MINOR 1" copy "${copy}")
if(NOT copy STREQUAL current)
  file(WRITE "${WORK}/plugin_abi.h.stripped" "${copy}")
  message(FATAL_ERROR "tests/abi/v1_2/deltakern/plugin_abi.h is not core/include/deltakern/plugin_abi.h plus "
                      "the added_in_1_2 fields: compare ${WORK}/plugin_abi.h.stripped with the real header")
endif()
