# Runs the command line with a bad config (DELTAKERN_CONFIG=CONFIG) and fails unless it
# exits with status 2 (deltakern::Error) and prints exactly "deltakern: EXPECTED" on stderr:
# a bad config is a message and a non-zero status, never a crash.
# cmake -DCLI=... -DCONFIG=... -DTOML=... -DEXPECTED=... -P check_cli_error.cmake
file(WRITE "${CONFIG}" "${TOML}")
execute_process(
  COMMAND ${CMAKE_COMMAND} -E env DELTAKERN_CONFIG=${CONFIG} DELTAKERN_PLUGIN_PATH= DELTAKERN_BACKEND=
          DELTAKERN_STRICT= ${CLI} list
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
string(STRIP "${err}" err)
if(NOT rc STREQUAL "2")
  message(FATAL_ERROR "deltakern list exited with '${rc}', expected 2\nstdout: ${out}\nstderr: ${err}")
endif()
if(NOT err STREQUAL "deltakern: ${EXPECTED}")
  message(FATAL_ERROR "stderr was\n  ${err}\nexpected\n  deltakern: ${EXPECTED}")
endif()
message(STATUS "exit 2 with: ${err}")
