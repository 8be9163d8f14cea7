# The CUDA backend: a runtime layer (src/cuda/cuda_backend.cu) plus per-architecture kernel sets,
# each compiled for its own architecture only (FLASHATTN_CUDA_ARCHS selects which sets exist).
target_sources(flashattn PRIVATE src/cuda/cuda_backend.cu)
target_link_libraries(flashattn PUBLIC CUDA::cudart)
target_compile_definitions(flashattn PRIVATE FLASHATTN_WITH_CUDA=1)
set_target_properties(flashattn PROPERTIES CUDA_ARCHITECTURES OFF CUDA_SEPARABLE_COMPILATION OFF)
target_compile_options(flashattn PRIVATE
  $<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr -O3 -std=c++17 -lineinfo>)

# Compiles `sources` for exactly one architecture (e.g. "80" or "90a").
function(flashattn_add_cuda_sources arch)
  foreach(src IN LISTS ARGN)
    set_source_files_properties(${src} PROPERTIES COMPILE_OPTIONS "-gencode=arch=compute_${arch},code=sm_${arch}")
  endforeach()
  target_sources(flashattn PRIVATE ${ARGN})
endfunction()

# The runtime layer itself only needs some architecture to compile device stubs for.
set_source_files_properties(src/cuda/cuda_backend.cu PROPERTIES COMPILE_OPTIONS "-gencode=arch=compute_80,code=sm_80")

if("80" IN_LIST FLASHATTN_CUDA_ARCHS)
  target_compile_definitions(flashattn PRIVATE FLASHATTN_WITH_SM80=1)
  include(${PROJECT_SOURCE_DIR}/cmake/sm80.cmake)
endif()
if("90a" IN_LIST FLASHATTN_CUDA_ARCHS)
  target_compile_definitions(flashattn PRIVATE FLASHATTN_WITH_SM90=1)
  include(${PROJECT_SOURCE_DIR}/cmake/sm90.cmake)
endif()
