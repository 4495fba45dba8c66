// The small-convolution kernels (the definitions are in small_conv.h, shared with attention_gates.cpp).
#include "small_conv.h"
