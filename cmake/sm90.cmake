# sm90 kernel sources (owned by the sm90 kernel work): the FlashAttention-3 forward for sm_90a.
# One generated instantiation per (dtype, head dim) that FLASHATTN_DTYPES x FLASHATTN_HDIMS selects;
# sm90_forward.cu learns which exist through FLASHATTN_SM90_<DTYPE>_HDIM<D> definitions (0 or 1).
set(FLASHATTN_SM90_SOURCES src/cuda/sm90/sm90_forward.cu src/cuda/sm90/sm90_backward.cu src/cuda/sm90/tensor_map.cu
    src/cuda/sm90/split_tail.cu src/cuda/sm90/sliced_decode.cu)
# The head dims of each kernel set: the X(<digits>) items of its line in src/cuda/sm90/head_dims.h.
function(flashattn_sm90_head_dims macro out)
  file(STRINGS ${PROJECT_SOURCE_DIR}/src/cuda/sm90/head_dims.h line REGEX "^#define ${macro}\\(X\\)")
  string(REGEX MATCHALL "X\\([0-9]+\\)" items "${line}")
  string(REGEX REPLACE "X\\(([0-9]+)\\)" "\\1" items "${items}")
  if(NOT items)
    message(FATAL_ERROR "no head dims in ${macro} of src/cuda/sm90/head_dims.h")
  endif()
  set(${out} ${items} PARENT_SCOPE)
endfunction()
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/cuda/sm90/head_dims.h)
flashattn_sm90_head_dims(FLASHATTN_SM90_FORWARD_HEAD_DIMS FLASHATTN_SM90_FORWARD_HEAD_DIMS)
flashattn_sm90_head_dims(FLASHATTN_SM90_BACKWARD_HEAD_DIMS FLASHATTN_SM90_BACKWARD_HEAD_DIMS)

# FLASHATTN_SM90_<DTYPE>_HDIM<D>: 1 where this build compiles the instantiation, else 0 (every
# forward head dim of both dtypes is defined, for head_dims.h's FLASHATTN_SM90_BUILT).
set(FLASHATTN_SM90_DEFINITIONS "")
foreach(dtype IN ITEMS bf16 fp16)
  foreach(hdim IN LISTS FLASHATTN_SM90_FORWARD_HEAD_DIMS)
    string(TOUPPER "FLASHATTN_SM90_${dtype}_HDIM${hdim}" definition)
    if(NOT dtype IN_LIST FLASHATTN_DTYPES OR NOT hdim IN_LIST FLASHATTN_HDIMS)
      list(APPEND FLASHATTN_SM90_DEFINITIONS ${definition}=0)
      continue()
    endif()
    list(APPEND FLASHATTN_SM90_DEFINITIONS ${definition}=1)
    list(APPEND FLASHATTN_SM90_SOURCES src/cuda/instantiations/sm90_fwd_${dtype}_hdim${hdim}.cu
         src/cuda/instantiations/sm90_fwd_pack_gqa_${dtype}_hdim${hdim}.cu
         src/cuda/instantiations/sm90_fwd_static_${dtype}_hdim${hdim}.cu
         src/cuda/instantiations/sm90_fwd_narrow_${dtype}_hdim${hdim}.cu)
    if(hdim IN_LIST FLASHATTN_SM90_BACKWARD_HEAD_DIMS)  # BackwardConfig
      list(APPEND FLASHATTN_SM90_SOURCES src/cuda/instantiations/sm90_bwd_${dtype}_hdim${hdim}.cu)
    endif()
    if(hdim EQUAL 64 OR hdim EQUAL 128)  # ShortRowsConfig (StaticScheduleConfig elsewhere)
      list(APPEND FLASHATTN_SM90_SOURCES src/cuda/instantiations/sm90_fwd_short_rows_${dtype}_hdim${hdim}.cu)
    endif()
    if(hdim EQUAL 64 OR hdim EQUAL 128)  # TallTilesConfig (the rule, FLASHATTN_SM90_VARIANT=tall)
      list(APPEND FLASHATTN_SM90_SOURCES src/cuda/instantiations/sm90_fwd_tall_tiles_${dtype}_hdim${hdim}.cu)
    endif()
    if(hdim EQUAL 64)  # PackGqaOneWgConfig (the rule, sm90_picks_pack_gqa_one_wg)
      list(APPEND FLASHATTN_SM90_SOURCES src/cuda/instantiations/sm90_fwd_pack_gqa_one_wg_${dtype}_hdim${hdim}.cu)
    endif()
    if(hdim EQUAL 128)  # ClusterPairsConfig (the rule, FLASHATTN_SM90_VARIANT=cluster)
      list(APPEND FLASHATTN_SM90_SOURCES src/cuda/instantiations/sm90_fwd_cluster_${dtype}_hdim${hdim}.cu)
    endif()
  endforeach()
endforeach()
flashattn_add_cuda_sources(90a ${FLASHATTN_SM90_SOURCES})
# The key splits' combine kernel (src/cuda/sm90/split_combine.h; on since session 70, its first GPU
# run): public, so that the tests see which build they test. OFF gives the packed kernels without it.
option(FLASHATTN_SM90_COMBINE_KERNEL "Build the sm90 key splits' combine kernel (FLASHATTN_SM90_SPLIT_COMBINE=kernel)" ON)
if(FLASHATTN_SM90_COMBINE_KERNEL)
  target_compile_definitions(flashattn PUBLIC FLASHATTN_SM90_COMBINE_KERNEL=1)
endif()
# The forward kernel launched as a programmatic dependent of the stream's previous kernel, waiting
# for it in the kernel (src/cuda/sm90/launch.h, kernel.h; session 73, on by default since session
# 74: the whole GPU suite passed with it and a decode step gained 6.5%): OFF gives ordinary
# launches and kernels without the wait. Public, so that the tests see which build they test.
option(FLASHATTN_SM90_PDL "Launch the sm90 forward as a programmatic dependent launch (FLASHATTN_SM90_PDL=0 at run time turns it off)" ON)
if(FLASHATTN_SM90_PDL)
  target_compile_definitions(flashattn PUBLIC FLASHATTN_SM90_PDL=1)
endif()
set_source_files_properties(src/cuda/sm90/sm90_forward.cu src/cuda/sm90/sm90_backward.cu src/cuda/sm90/sliced_decode.cu
  PROPERTIES COMPILE_DEFINITIONS "${FLASHATTN_SM90_DEFINITIONS}")

# Side-by-side timing of the sm90 forward (benchmarks/cpp/sm90_bench.cpp), run by scripts/device_sm90.sh.
if(EXISTS ${PROJECT_SOURCE_DIR}/benchmarks/cpp/sm90_bench.cpp)
  add_executable(flashattn_sm90_bench ${PROJECT_SOURCE_DIR}/benchmarks/cpp/sm90_bench.cpp)
  target_link_libraries(flashattn_sm90_bench PRIVATE flashattn CUDA::cudart)
endif()
# A probe: one sm_90a-only source under benchmarks/cpp/ built into its own executable (where the
# file exists), with the library's headers and whatever it links besides the CUDA runtime.
function(flashattn_sm90_probe target source)
  set(path ${PROJECT_SOURCE_DIR}/benchmarks/cpp/${source})
  if(NOT EXISTS ${path})
    return()
  endif()
  add_executable(${target} ${path})
  set_source_files_properties(${path} PROPERTIES COMPILE_OPTIONS "-gencode=arch=compute_90a,code=sm_90a;-O3")
  set_target_properties(${target} PROPERTIES CUDA_ARCHITECTURES OFF)
  target_include_directories(${target} PRIVATE ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/include)
  target_link_libraries(${target} PRIVATE ${ARGN} CUDA::cudart)
endfunction()
# The pipe probe: the key loop's GEMMs, softmax and K / V ring alone, without the library's
# kernels (session 51; builds in seconds).
flashattn_sm90_probe(flashattn_sm90_pipe_probe sm90_pipe_probe.cu)
# The TMA stream probe: the packed decode kernel's K / V loads alone, with the library's tensor
# maps (session 90).
flashattn_sm90_probe(flashattn_sm90_tma_stream_probe sm90_tma_stream_probe.cu flashattn)
# The variant harness compiles a hundred-odd kernels in one translation unit (19 minutes on CI's
# two cores in session 33): scripts/build.sh leaves it out where no GPU could run it.
option(FLASHATTN_BUILD_SM90_VARIANTS "Build the sm90 variant harness (flashattn_sm90_variants)" ON)
if(FLASHATTN_BUILD_SM90_VARIANTS AND EXISTS ${PROJECT_SOURCE_DIR}/benchmarks/cpp/sm90_variants.cu)
  add_executable(flashattn_sm90_variants ${PROJECT_SOURCE_DIR}/benchmarks/cpp/sm90_variants.cu)
  set_source_files_properties(${PROJECT_SOURCE_DIR}/benchmarks/cpp/sm90_variants.cu PROPERTIES
    COMPILE_OPTIONS "-gencode=arch=compute_90a,code=sm_90a;--expt-relaxed-constexpr;-O3;-lineinfo")
  set_target_properties(flashattn_sm90_variants PROPERTIES CUDA_ARCHITECTURES OFF)
  target_include_directories(flashattn_sm90_variants PRIVATE ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(flashattn_sm90_variants PRIVATE flashattn CUDA::cudart)
  # An older kernel timed beside the current one (see benchmarks/cpp/sm90_baseline.cu).
  set(FLASHATTN_SM90_BASELINE "" CACHE PATH "folder holding cuda/sm90/ of an older sm90 kernel to time beside this one")
  if(FLASHATTN_SM90_BASELINE)
    # Its own object library: the older cuda/sm90/ must come before the current src/ on the path.
    add_library(flashattn_sm90_baseline OBJECT ${PROJECT_SOURCE_DIR}/benchmarks/cpp/sm90_baseline.cu)
    target_include_directories(flashattn_sm90_baseline PRIVATE ${FLASHATTN_SM90_BASELINE} ${PROJECT_SOURCE_DIR}/src
                               ${PROJECT_SOURCE_DIR}/include)
    target_compile_options(flashattn_sm90_baseline PRIVATE -gencode=arch=compute_90a,code=sm_90a --expt-relaxed-constexpr -O3)
    set_target_properties(flashattn_sm90_baseline PROPERTIES CUDA_ARCHITECTURES OFF)
    target_sources(flashattn_sm90_variants PRIVATE $<TARGET_OBJECTS:flashattn_sm90_baseline>)
    target_compile_definitions(flashattn_sm90_variants PRIVATE FLASHATTN_SM90_BASELINE=1)
  endif()
endif()
