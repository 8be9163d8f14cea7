# sm80 kernel sources (owned by the sm80 kernel work): FlashAttention-2 forward and backward.
# One generated instantiation per (direction, dtype, head dim) that FLASHATTN_DTYPES x FLASHATTN_HDIMS
# selects; dispatch.cu learns which exist through FLASHATTN_SM80_HDIM_<D> and FLASHATTN_SM80_<DTYPE>.
# sm_80 machine code does not run on compute capability 9.x (machine code is compatible only
# within one major version), so FLASHATTN_SM80_SASS_90 also embeds sm_90 machine code of the same
# kernels for the H100/H200; it doubles this set's compile time (a few seconds per file).
option(FLASHATTN_SM80_SASS_90 "Also embed sm_90 machine code for the sm80 kernels (needed on Hopper)" ON)

set(FLASHATTN_SM80_SOURCES src/cuda/sm80/dispatch.cu)
set(FLASHATTN_SM80_DEFINITIONS "")
foreach(dtype IN ITEMS fp16 bf16)
  if(dtype IN_LIST FLASHATTN_DTYPES)
    string(TOUPPER "FLASHATTN_SM80_${dtype}" definition)
    list(APPEND FLASHATTN_SM80_DEFINITIONS ${definition}=1)
  endif()
endforeach()
foreach(hdim IN ITEMS 32 64 96 128 192 256)
  if(hdim IN_LIST FLASHATTN_HDIMS)
    list(APPEND FLASHATTN_SM80_DEFINITIONS FLASHATTN_SM80_HDIM_${hdim}=1)
    foreach(dtype IN ITEMS fp16 bf16)
      if(dtype IN_LIST FLASHATTN_DTYPES)
        list(APPEND FLASHATTN_SM80_SOURCES
             src/cuda/instantiations/sm80_fwd_hdim${hdim}_${dtype}.cu
             src/cuda/instantiations/sm80_bwd_hdim${hdim}_${dtype}.cu)
      endif()
    endforeach()
  endif()
endforeach()
flashattn_add_cuda_sources(80 ${FLASHATTN_SM80_SOURCES})
# FLASHATTN_SM80_SASS_80=OFF leaves out the sm_80 machine code (a quicker build for a Hopper test machine).
option(FLASHATTN_SM80_SASS_80 "Embed sm_80 machine code for the sm80 kernels" ON)
if(FLASHATTN_SM80_SASS_90)
  if(FLASHATTN_SM80_SASS_80)
    set(sm80_gencodes "-gencode=arch=compute_80,code=sm_80;-gencode=arch=compute_90,code=sm_90")
  else()
    set(sm80_gencodes "-gencode=arch=compute_90,code=sm_90")
  endif()
  foreach(src IN LISTS FLASHATTN_SM80_SOURCES)
    set_source_files_properties(${src} PROPERTIES COMPILE_OPTIONS "${sm80_gencodes}")
  endforeach()
endif()
set_source_files_properties(src/cuda/sm80/dispatch.cu PROPERTIES COMPILE_DEFINITIONS "${FLASHATTN_SM80_DEFINITIONS}")

# Timing of the sm80 kernels through the public API (benchmarks/cpp/sm80_bench.cpp), run by scripts/device_sm80.sh.
if(EXISTS ${PROJECT_SOURCE_DIR}/benchmarks/cpp/sm80_bench.cpp)
  add_executable(flashattn_sm80_bench ${PROJECT_SOURCE_DIR}/benchmarks/cpp/sm80_bench.cpp)
  target_link_libraries(flashattn_sm80_bench PRIVATE flashattn CUDA::cudart)
endif()

# Host time per API call and per CUDA runtime call it makes (benchmarks/cpp/host_cost.cu).
if(EXISTS ${PROJECT_SOURCE_DIR}/benchmarks/cpp/host_cost.cu)
  add_executable(flashattn_host_cost ${PROJECT_SOURCE_DIR}/benchmarks/cpp/host_cost.cu)
  target_link_libraries(flashattn_host_cost PRIVATE flashattn CUDA::cudart)
endif()

# Side-by-side timing of experimental backward layouts (BackwardConfig's kVariant), sm_90 machine code only.
if(EXISTS ${PROJECT_SOURCE_DIR}/benchmarks/cpp/sm80_bwd_variants.cu)
  add_executable(flashattn_sm80_bwd_variants ${PROJECT_SOURCE_DIR}/benchmarks/cpp/sm80_bwd_variants.cu)
  target_link_libraries(flashattn_sm80_bwd_variants PRIVATE flashattn CUDA::cudart)
  target_include_directories(flashattn_sm80_bwd_variants PRIVATE ${PROJECT_SOURCE_DIR}/src)
  set_target_properties(flashattn_sm80_bwd_variants PROPERTIES CUDA_ARCHITECTURES OFF)
  target_compile_options(flashattn_sm80_bwd_variants PRIVATE
    --expt-relaxed-constexpr -O3 -std=c++17 -lineinfo -gencode=arch=compute_90,code=sm_90)
endif()
