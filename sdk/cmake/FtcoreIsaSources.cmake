# ftcore_add_isa_sources(<target> <stem> [FLAGS <flags...>]
#                        [AVX2_FLAGS <flags...>] [AVX512_FLAGS <flags...>])
#
# Adds a kernel's three per-ISA translation units, <stem>_generic.cpp,
# <stem>_avx2.cpp and <stem>_avx512.cpp (beside the calling CMakeLists.txt),
# to <target>. Each is compiled with FLAGS (e.g. -O3 -ffp-contract=off) and
# then its ISA's flags, on that file only, so the rest of the target stays
# generic x86-64 and sdk/cpu_isa.h picks the variant at run time.
#   AVX2_FLAGS   default: -mavx2 -mfma
#   AVX512_FLAGS default: -mavx512f -mavx512bw -mavx512vl -mfma -mprefer-vector-width=512
# The three skip the shared precompiled header: it was built without these flags.
# The properties are set in <target>'s directory (TARGET_DIRECTORY), so a
# subdirectory may add kernels to a target its parent created.
# The default AVX-512 flags, also for a kernel's extra AVX-512 variant (e.g.
# with -mavx512vbmi added, picked by sdk::cpu_has_avx512_vbmi()).
set(FTCORE_AVX512_FLAGS -mavx512f -mavx512bw -mavx512vl -mfma -mprefer-vector-width=512)

function(ftcore_add_isa_sources target stem)
  cmake_parse_arguments(ARG "" "" "FLAGS;AVX2_FLAGS;AVX512_FLAGS" ${ARGN})
  if(NOT ARG_AVX2_FLAGS)
    set(ARG_AVX2_FLAGS -mavx2 -mfma)
  endif()
  if(NOT ARG_AVX512_FLAGS)
    set(ARG_AVX512_FLAGS ${FTCORE_AVX512_FLAGS})
  endif()
  set(_dir "${CMAKE_CURRENT_SOURCE_DIR}")
  set(_generic "${_dir}/${stem}_generic.cpp")
  set(_avx2 "${_dir}/${stem}_avx2.cpp")
  set(_avx512 "${_dir}/${stem}_avx512.cpp")
  target_sources(${target} PRIVATE "${_generic}" "${_avx2}" "${_avx512}")
  if(ARG_FLAGS)
    set_source_files_properties("${_generic}" TARGET_DIRECTORY ${target} PROPERTIES COMPILE_OPTIONS "${ARG_FLAGS}")
  endif()
  set(_avx2_options ${ARG_FLAGS} ${ARG_AVX2_FLAGS})
  set(_avx512_options ${ARG_FLAGS} ${ARG_AVX512_FLAGS})
  set_source_files_properties("${_avx2}" TARGET_DIRECTORY ${target} PROPERTIES COMPILE_OPTIONS "${_avx2_options}")
  set_source_files_properties("${_avx512}" TARGET_DIRECTORY ${target} PROPERTIES COMPILE_OPTIONS "${_avx512_options}")
  set_source_files_properties("${_generic}" "${_avx2}" "${_avx512}" TARGET_DIRECTORY ${target} PROPERTIES SKIP_PRECOMPILE_HEADERS ON)
endfunction()
