# Script mode (cmake -DROOT=<source tree> -P CheckLayers.cmake): checks who may include whom, and that core/ tests no
# backend's macro, and fails naming each include (or test) that breaks the order. The CTest test `layers` runs it on
# the source tree.
#
# core/ is arranged in layers, bottom to top; a file may include its own layer and the layers below, never above:
#   core/ (its own files)  the headers C++, CUDA and OpenCL C all include (device_shared.h, tree_shared.h), errors
#   core/device/           the device API (Backend, Buffer, devices) and the parallel primitives
#   core/files/            file formats: HDF5 and tipsy snapshots, units, .npy, PNG, key=value text, atomic writes
#   core/models/           initial-condition models: Plummer, Hernquist, uniform, disc, merger, galaxies (and the
#                          Legendre potential, centring and counter-based random streams they are made with)
#   core/render/           images of snapshots: projected surface density, colour map, annotations (onto PNG)
#   core/tree/             the octree: build, link, groups, multipoles
#   core/gravity/          forces: the tree walk and direct summation
#   core/parallel/         the ranks of a parallel run over MPI: comm, domain decomposition, local essential trees,
#                          distributed forces
#   core/simulation/       the integrator, runs, checkpoints
# Beside them: backend_cuda/ and backend_opencl/ implement core/device (they include core/ and core/device/ only,
# never each other); kernels_cu/ include the shared headers, backend_cuda/kernel_registry.hpp and their own .cuh
# headers (kernels_cu/block.cuh: the block-level building blocks); kernels_cl/ include nothing (the program text is
# pasted together, kernels_cl/block.cl first: cmake/EmbedCl.cmake). apps/ and tests/ stand on top and may include
# anything.
# Every quoted include names its file from the repository root (one include path, no hidden search paths); only the
# shared .h headers include each other by bare name, since the OpenCL program pastes them from their own folder, and
# only downwards in their order (shared_headers below: tree_shared.h includes device_shared.h, never the reverse), so
# that they form no cycle and cmake/EmbedCl.cmake can paste them into one another.
# core/ never includes a vendor header (CUDA, OpenCL, CUB, Boost.Compute, NCCL), and only core/parallel/comm.cpp
# includes MPI's (the rest of banyan builds and runs the same without MPI).
# core/ names no backend: it reaches them through the registry (core/device/backend_registry.hpp), which each backend
# fills through its register_<name>_backend, called from a translation unit the build generates
# (cmake/BackendRegistry.cmake). So core/ never tests which backends are built (BANYAN_HAVE_<NAME> for each folder
# backend_<name>/, defined for the backends, programs and tests only: in core/ such a test would silently take the
# "absent" branch).
cmake_minimum_required(VERSION 3.25)
if(NOT ROOT)
  message(FATAL_ERROR "usage: cmake -DROOT=<source tree> -P CheckLayers.cmake")
endif()

set(layers core core/device core/files core/models core/render core/tree core/gravity core/parallel core/simulation)
# The shared headers of core/, bottom first: each may include by bare name only those before it.
set(shared_headers device_shared.h tree_shared.h)
list(JOIN shared_headers ", " shared_list)
set(vendor_headers "^(cuda|cub/|thrust/|CL/|boost/compute|hip/|nvrtc|cuda_runtime|nccl)")

# The folder of a file, relative to ROOT.
function(folder_of path out)
  get_filename_component(dir "${path}" DIRECTORY)
  set(${out} "${dir}" PARENT_SCOPE)
endfunction()

# The macros that say a backend is built: BANYAN_HAVE_<NAME> for each folder backend_<name>/.
file(GLOB backend_dirs LIST_DIRECTORIES true RELATIVE "${ROOT}" "${ROOT}/backend_*")
set(backend_macros "")
foreach(d ${backend_dirs})
  if(IS_DIRECTORY "${ROOT}/${d}")
    string(REGEX REPLACE "^backend_" "" name "${d}")
    string(TOUPPER "${name}" name)
    list(APPEND backend_macros "${name}")
  endif()
endforeach()
string(REPLACE ";" "|" backend_macros "${backend_macros}")

set(problems "")
set(checked 0)
file(GLOB_RECURSE sources RELATIVE "${ROOT}" "${ROOT}/core/*" "${ROOT}/backend_cuda/*" "${ROOT}/backend_opencl/*"
     "${ROOT}/kernels_cu/*" "${ROOT}/kernels_cl/*" "${ROOT}/apps/*")
# tests/, not tests/tools/ (its layers_fixture is the bad tree of layers_detect).
file(GLOB_RECURSE tests RELATIVE "${ROOT}" "${ROOT}/tests/*")
list(FILTER tests EXCLUDE REGEX "^tests/tools/")
list(APPEND sources ${tests})
foreach(file ${sources})
  if(NOT file MATCHES "\\.(h|hpp|cpp|cu|cuh|cl)$")
    continue()
  endif()
  math(EXPR checked "${checked} + 1")
  folder_of("${file}" dir)
  list(FIND layers "${dir}" rank)
  if(dir MATCHES "^core" AND rank EQUAL -1)
    string(APPEND problems "  ${file}: core/ has no layer ${dir} (the layers are listed in cmake/CheckLayers.cmake)\n")
  endif()
  if(dir MATCHES "^core" AND backend_macros)
    file(STRINGS "${ROOT}/${file}" backend_tests REGEX "BANYAN_HAVE_(${backend_macros})([^A-Za-z0-9_]|$)")
    foreach(line ${backend_tests})
      string(REGEX MATCH "BANYAN_HAVE_(${backend_macros})" name "${line}")
      string(APPEND problems "  ${file}: tests ${name}; core/ names no backend (core/device/backend_registry.hpp)\n")
    endforeach()
  endif()
  file(STRINGS "${ROOT}/${file}" lines REGEX "^[ \t]*#[ \t]*include")
  foreach(line ${lines})
    if(line MATCHES "#[ \t]*include[ \t]*\"([^\"]+)\"")
      set(inc "${CMAKE_MATCH_1}")
      if(dir STREQUAL "kernels_cl")
        string(APPEND problems
               "  ${file}: includes ${inc} (OpenCL programs are pasted together; they include nothing)\n")
        continue()
      endif()
      if(NOT inc MATCHES "/")
        # A bare name: only the shared headers of core/, each other.
        if(dir STREQUAL "core" AND file MATCHES "\\.h$" AND inc MATCHES "\\.h$" AND EXISTS "${ROOT}/core/${inc}")
          get_filename_component(name "${file}" NAME)
          list(FIND shared_headers "${name}" name_at)
          list(FIND shared_headers "${inc}" inc_at)
          if(name_at EQUAL -1 OR inc_at EQUAL -1 OR NOT inc_at LESS name_at)
            string(APPEND problems "  ${file}: includes ${inc}; a shared header includes only those before it in the order "
                                   "${shared_list}, so that they form no cycle\n")
          endif()
          continue()
        endif()
        string(APPEND problems "  ${file}: includes \"${inc}\" by a bare name; name it from the repository root\n")
        continue()
      endif()
      if(NOT EXISTS "${ROOT}/${inc}")
        string(APPEND problems "  ${file}: includes ${inc}, which is not a file of the repository\n")
        continue()
      endif()
      folder_of("${inc}" inc_dir)
      list(FIND layers "${inc_dir}" inc_rank)
      if(dir MATCHES "^core")
        if(inc_rank EQUAL -1 OR inc_rank GREATER rank)
          string(APPEND problems "  ${file}: includes ${inc}, from a layer above ${dir}\n")
        endif()
      elseif(dir MATCHES "^backend_")
        if(NOT (inc_dir STREQUAL dir OR inc_dir STREQUAL "core" OR inc_dir STREQUAL "core/device"))
          string(APPEND problems "  ${file}: includes ${inc}; a backend includes core/, core/device/ and itself only\n")
        endif()
      elseif(dir STREQUAL "kernels_cu")
        if(NOT (inc_dir STREQUAL "core" OR inc STREQUAL "backend_cuda/kernel_registry.hpp" OR
                (inc_dir STREQUAL "kernels_cu" AND inc MATCHES "\\.cuh$")))
          string(APPEND problems "  ${file}: includes ${inc}; a CUDA kernel includes the shared headers of core/, "
                                 "backend_cuda/kernel_registry.hpp and kernels_cu/*.cuh only\n")
        endif()
      endif()
    elseif(line MATCHES "#[ \t]*include[ \t]*<([^>]+)>")
      set(inc "${CMAKE_MATCH_1}")
      if(dir MATCHES "^core" AND inc MATCHES "${vendor_headers}")
        string(APPEND problems "  ${file}: includes the vendor header <${inc}>; core/ is backend-agnostic\n")
      endif()
      if(dir MATCHES "^core" AND inc MATCHES "^mpi" AND NOT file STREQUAL "core/parallel/comm.cpp")
        string(APPEND problems "  ${file}: includes <${inc}>; only core/parallel/comm.cpp includes MPI's headers\n")
      endif()
    endif()
  endforeach()
endforeach()

if(checked EQUAL 0)
  message(FATAL_ERROR "layers: no source files found under ${ROOT}")
endif()
if(problems)
  message(FATAL_ERROR "layers: includes that break the layering:\n${problems}")
endif()
message(STATUS "layers: ${checked} files checked, every include in order")
