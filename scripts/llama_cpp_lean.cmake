# Read inside llama.cpp's project() when scripts/setup builds llama-cpp-python for the `export`
# extra (CMAKE_PROJECT_llama.cpp_INCLUDE). llama-cpp-python turns llama.cpp's `common` library on,
# which only its multimodal library (mtmd, LLAVA_BUILD) links; mens loads neither: libllama and
# ggml are what `mens export` and the GGUF tests call. Without the two, the build takes ~200 s on
# two cores instead of ~440 s. A plain `pip install 'mens[export]'` builds both; either works.
set(LLAMA_BUILD_COMMON OFF CACHE BOOL "llama.cpp: build common utils library" FORCE)
