# ftcore_add_plugin(KIND <kind> NAME <name> SOURCES <files...>
#                   [LINK_LIBRARIES <libs...>] [COMPILE_DEFINITIONS <defs...>]
#                   [OUTPUT_DIRECTORY <dir>] [NO_INSTALL])
#
# Builds one plugin as a MODULE library named libftcore_<kind>_<name>.so, the
# same way in ftcore's own tree and out of tree (after find_package(ftcore)).
# Symbols are hidden except the exported ftcore_plugin_info, so two plugins
# never clash. The target is ftcore_<kind>_<name>. Kernels compiled once per
# ISA add their translation units with ftcore_add_isa_sources() (included here).
include("${CMAKE_CURRENT_LIST_DIR}/FtcoreIsaSources.cmake")

function(ftcore_add_plugin)
  cmake_parse_arguments(ARG "NO_INSTALL" "KIND;NAME;OUTPUT_DIRECTORY"
                        "SOURCES;LINK_LIBRARIES;COMPILE_DEFINITIONS" ${ARGN})
  # The names in sdk/include/ftcore/sdk/component_kinds.h (CMake cannot read
  # the C++ table when this file is used from an installed package).
  set(_kinds optimizer scheduler adapter quantizer sampler logger)
  if(NOT ARG_KIND IN_LIST _kinds)
    message(FATAL_ERROR "ftcore_add_plugin: KIND must be one of ${_kinds}, got '${ARG_KIND}'")
  endif()
  if(NOT ARG_NAME MATCHES "^[a-z0-9_]+$")
    message(FATAL_ERROR "ftcore_add_plugin: NAME must match [a-z0-9_]+, got '${ARG_NAME}'")
  endif()
  set(_target ftcore_${ARG_KIND}_${ARG_NAME})
  add_library(${_target} MODULE ${ARG_SOURCES})
  target_link_libraries(${_target} PRIVATE ftcore::sdk ${ARG_LINK_LIBRARIES})
  target_compile_definitions(${_target} PRIVATE ${ARG_COMPILE_DEFINITIONS})
  if(NOT ARG_OUTPUT_DIRECTORY)
    if(DEFINED FTCORE_PLUGIN_OUTPUT_DIRECTORY)
      set(ARG_OUTPUT_DIRECTORY "${FTCORE_PLUGIN_OUTPUT_DIRECTORY}")
    else()
      set(ARG_OUTPUT_DIRECTORY "${CMAKE_CURRENT_BINARY_DIR}")
    endif()
  endif()
  # Installed, a plugin finds libftcore_sdk two folders up (<libdir>/ftcore/plugins
  # -> <libdir>), out of tree also in the ftcore it was built against, and
  # libtorch where ftcore found it. Only these: the link path would add the
  # nonexistent MKL folders torch's CMake config declares.
  set(_rpath "$ORIGIN/../..")
  foreach(_dir IN ITEMS "${FTCORE_LIBRARY_DIR}" "${FTCORE_TORCH_LIB_DIR}")
    if(_dir AND NOT _dir IN_LIST _rpath)
      list(APPEND _rpath "${_dir}")
    endif()
  endforeach()
  set_target_properties(${_target} PROPERTIES
    PREFIX "lib"
    OUTPUT_NAME "ftcore_${ARG_KIND}_${ARG_NAME}"
    LIBRARY_OUTPUT_DIRECTORY "${ARG_OUTPUT_DIRECTORY}"
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON
    INSTALL_RPATH "${_rpath}"
    INSTALL_RPATH_USE_LINK_PATH OFF)
  # In ftcore's own tree, reuse the shared precompiled header.
  if(TARGET ftcore_plugin_pch AND NOT ARG_COMPILE_DEFINITIONS)
    target_precompile_headers(${_target} REUSE_FROM ftcore_plugin_pch)
  endif()
  if(NOT ARG_NO_INSTALL)
    if(DEFINED FTCORE_INSTALL_PLUGIN_DIR)
      set(_dest "${FTCORE_INSTALL_PLUGIN_DIR}")
    else()
      set(_dest "lib/ftcore/plugins")
    endif()
    install(TARGETS ${_target} LIBRARY DESTINATION "${_dest}")
  endif()
endfunction()
