# deltakern_add_plugin(<target> SOURCES <file>... [OUTPUT_DIRECTORY <dir>] [COMPONENT <component>])
#
# One plugin library, built the way every plugin is (as ggml's ggml_add_backend_library does for
# its backends): a MODULE lib<target>.so, loaded at run time and never linked; compiled against
# the ABI headers alone with hidden symbols, and linked with cmake/plugin_exports.map so that
# deltakern_plugin_entry is its only export. It lands in OUTPUT_DIRECTORY (default: the build's
# plugin directory, where the core finds it) and, with COMPONENT, installs into the plugin
# directory as part of that install component.
function(deltakern_add_plugin target)
  cmake_parse_arguments(arg "" "OUTPUT_DIRECTORY;COMPONENT" "SOURCES" ${ARGN})
  if(NOT arg_OUTPUT_DIRECTORY)
    set(arg_OUTPUT_DIRECTORY "${DELTAKERN_PLUGIN_OUTPUT_DIR}")
  endif()
  set(exports "${PROJECT_SOURCE_DIR}/cmake/plugin_exports.map")
  add_library(${target} MODULE ${arg_SOURCES})
  target_link_libraries(${target} PRIVATE deltakern::abi deltakern_plugin_flags)
  target_link_options(${target} PRIVATE "LINKER:--version-script=${exports}")
  set_target_properties(${target} PROPERTIES
    PREFIX "lib"
    OUTPUT_NAME ${target}
    LIBRARY_OUTPUT_DIRECTORY "${arg_OUTPUT_DIRECTORY}"
    LINK_DEPENDS "${exports}"
    CXX_VISIBILITY_PRESET hidden
    CUDA_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON)
  if(arg_COMPONENT)
    install(TARGETS ${target} LIBRARY DESTINATION ${DELTAKERN_PLUGIN_SUBDIR} COMPONENT ${arg_COMPONENT})
  endif()
endfunction()
