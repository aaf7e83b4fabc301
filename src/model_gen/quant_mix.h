// llama.cpp's K-quant and IQ4 file types ("mixes") for `pith model gen --dtype q2_k|q3_k_s|
// q3_k_m|q3_k_l|q4_k_s|q4_k_m|q5_k_m|q6_k|iq4_nl|iq4_xs`: which ggml type each tensor of a Llama
// model gets, following
// the rules of llama.cpp's quantiser (llama_tensor_get_type in src/llama-quant.cpp) for the llama
// architecture, so that generated files have the tensor types of the files people download.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "formats/dtype.h"

namespace pith {

enum class QuantMix {
  Q2_K,
  Q3_K_S,
  Q3_K_M,
  Q3_K_L,
  Q4_K_S,
  Q4_K_M,
  Q5_K_M,
  Q6_K,
  IQ4_NL,
  IQ4_XS,
  MXFP4_MOE
};

// "q2_k", "q3_k_s", "q3_k_m", "q3_k_l", "q4_k_s", "q4_k_m", "q5_k_m", "q6_k", "iq4_nl",
// "iq4_xs", "mxfp4_moe"; nullopt for other names.
std::optional<QuantMix> quant_mix_from_name(std::string_view name);
std::string_view quant_mix_name(QuantMix mix);
// llama.cpp's general.file_type code (LLAMA_FTYPE_MOSTLY_*) of the mix.
uint32_t quant_mix_file_type(QuantMix mix);

// The type of a matrix of the mix, by its GGUF name ("blk.3.attn_v.weight", "output.weight"),
// its row length (cols) and the model's layer count. `tied_output`: the model has no
// output.weight, so token_embd also serves as the output matrix. `n_gqa`: query heads per KV
// head (q2_k's attn_v depends on it).
DType quant_mix_tensor_dtype(QuantMix mix, const std::string& gguf_name, size_t cols,
                             uint32_t n_layers, bool tied_output, uint32_t n_gqa = 1);

}  // namespace pith
