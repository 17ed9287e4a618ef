// Where Kiln keeps what it learns between runs: kilnc's compile cache (codegen/compile_cache.h)
// and the CUDA driver's cuDNN algorithm choices (runtime/drivers/cuda/cudnn_conv.h).
//
// Thread-safety: reads the environment only.
#pragma once

#include <string>

namespace kiln {

// $KILN_CACHE_DIR if set and non-empty, else $XDG_CACHE_HOME/kiln (when it is an absolute path,
// as the XDG spec requires), else $HOME/.cache/kiln; "" when none is known.
std::string kiln_cache_dir();

}  // namespace kiln
