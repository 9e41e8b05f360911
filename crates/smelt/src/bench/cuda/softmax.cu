// The softmax of a fused attention kernel's tiles of scores, one warp per row of `n`
// scores (n <= 128 in the plan), bf16 in and out, fp32 arithmetic. Compiled at run time by
// NVRTC (smelt's CUDA backend) and timed beside the tiles' cuBLAS GEMMs.
//
// bf16 is read and written as its 16 bits (no cuda_bf16.h needed): the upper half of an
// fp32, rounded to nearest even on the way out.

__device__ __forceinline__ float from_bf16(unsigned short x) {
    return __uint_as_float(((unsigned int)x) << 16);
}

__device__ __forceinline__ unsigned short to_bf16(float f) {
    unsigned int u = __float_as_uint(f);
    u += 0x7FFFu + ((u >> 16) & 1u);
    return (unsigned short)(u >> 16);
}

__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xFFFFFFFFu, v, o));
    return v;
}

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xFFFFFFFFu, v, o);
    return v;
}

// Forward: each row's maximum, exponentials, sum and scaling (the online softmax of one
// tile). Warps of a block take consecutive rows; a warp past the last row returns whole.
extern "C" __global__ void softmax_forward(const unsigned short* scores,
                                           unsigned short* out, long long rows, int n) {
    long long row = (long long)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    int lane = threadIdx.x & 31;
    if (row >= rows) return;
    const unsigned short* s = scores + row * n;
    unsigned short* o = out + row * n;
    float m = -3.0e38f;
    for (int j = lane; j < n; j += 32) m = fmaxf(m, from_bf16(s[j]));
    m = warp_max(m);
    float sum = 0.0f;
    for (int j = lane; j < n; j += 32) sum += __expf(from_bf16(s[j]) - m);
    float scale = 1.0f / warp_sum(sum);
    for (int j = lane; j < n; j += 32) o[j] = to_bf16(__expf(from_bf16(s[j]) - m) * scale);
}

// Backward: the probabilities recomputed from the scores and the row's log-sum-exp (here
// its first score), and the scores' gradient P * (dP - D) (D here the row's first
// gradient).
extern "C" __global__ void softmax_backward(const unsigned short* scores,
                                            const unsigned short* grads,
                                            unsigned short* out, long long rows, int n) {
    long long row = (long long)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    int lane = threadIdx.x & 31;
    if (row >= rows) return;
    const unsigned short* s = scores + row * n;
    const unsigned short* g = grads + row * n;
    unsigned short* o = out + row * n;
    float lse = from_bf16(s[0]);
    float d = from_bf16(g[0]);
    for (int j = lane; j < n; j += 32)
        o[j] = to_bf16(__expf(from_bf16(s[j]) - lse) * (from_bf16(g[j]) - d));
}
