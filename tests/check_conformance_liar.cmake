# A plugin author's run against a lying plugin, as CI would see it: the command must fail
# with exit status 1 (a crash or a setup error is not the expected failure), name the lie
# on its output and in the first-failure table, and write JUnit XML whose failures carry
# the same reason.
#   -DCLI=<deltakern> -DPLUGIN=<library> -DJUNIT=<file> -DREASON=<text> -P check_conformance_liar.cmake
file(REMOVE "${JUNIT}")
execute_process(COMMAND "${CLI}" conformance --plugin "${PLUGIN}" --tier quick --junit "${JUNIT}"
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc STREQUAL "1")
  message(FATAL_ERROR "expected exit status 1, got '${rc}'\n${out}\n${err}")
endif()
if(NOT out MATCHES "\n[0-9]+ passed, [1-9][0-9]* failed\n")
  message(FATAL_ERROR "no closing line with failures:\n${out}")
endif()
string(FIND "${out}" "first failure per target and op:" table)
string(FIND "${out}" "${REASON}" reason_at)
if(table EQUAL -1 OR reason_at EQUAL -1)
  message(FATAL_ERROR "the output does not name '${REASON}' in the first-failure table:\n${out}")
endif()
if(NOT EXISTS "${JUNIT}")
  message(FATAL_ERROR "no JUnit XML written to ${JUNIT}")
endif()
file(READ "${JUNIT}" xml)
if(NOT xml MATCHES "<failure message=\"\\[causal_conv1d_(varlen|update) [^]]+\\] [^\"]*${REASON}")
  message(FATAL_ERROR "the JUnit XML has no failure naming op, case and '${REASON}':\n${xml}")
endif()
