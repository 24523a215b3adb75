# Picks CUDA architectures when the user named none: the GPU found by nvidia-smi, else sm_80 and sm_90 machine code
# plus compute_90 PTX, so that a build on a machine without a GPU (CI) also runs on newer GPUs.
function(banyan_default_cuda_architectures out)
  find_program(NVIDIA_SMI nvidia-smi)
  if(NVIDIA_SMI)
    execute_process(COMMAND ${NVIDIA_SMI} --query-gpu=compute_cap --format=csv,noheader
                    OUTPUT_VARIABLE caps RESULT_VARIABLE rc ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
    if(rc EQUAL 0 AND caps MATCHES "^([0-9]+)\\.([0-9]+)")
      set(${out} "${CMAKE_MATCH_1}${CMAKE_MATCH_2}" PARENT_SCOPE)
      return()
    endif()
  endif()
  set(${out} "80-real;90" PARENT_SCOPE)
endfunction()
